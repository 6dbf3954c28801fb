// The public API of rlm. Everything else under src/ is internal and may change between versions.

// The engine
export { RLM, RlmSession } from './engine/rlm.js';
export { checkOutputSchema } from './engine/output-schema.js';
export type { CompletionInput, CompletionResult, OutputSchemaSpec, PreparedRLM, RLMOptions, SetupCode } from './engine/rlm.js';
export type { CallerTools } from './engine/caller-tools.js';
export type { CodeBlockRecord, IterationRecord, RejectedFinal, RlmEvent, RlmResult, SubcallRecord, ToolCallRecord } from './engine/events.js';
export type { UsageSummary, ModelUsage } from './lm/usage.js';
export type { ModelPrice, PriceTable } from './lm/prices.js';
export { DEFAULTS } from './defaults.js';

// Errors: branch on `code` or the class, never on the message
export { RlmError, ConfigurationError, SandboxError, ModelError, ToolError, ToolLoopError } from './errors.js';
export { RunFailedError, RunLimitError } from './engine/limits.js';
export type { LimitCode, RunFailureDetails } from './engine/limits.js';

// Models
export { OpenAIModel } from './lm/openai.js';
export type { OpenAIModelOptions } from './lm/openai.js';
export { openAIProvider, setDefaultModelProvider, singleModelProvider } from './lm/provider.js';
export type { ModelProvider } from './lm/provider.js';
export { findLocalServer, LOCAL_SERVER_CANDIDATES } from './lm/discover.js';
export type { LocalServer } from './lm/discover.js';
export type { ChatMessage, ChatRequest, ChatResponse, LanguageModel, TokenUsage, ToolCall, ToolChoice, ToolSpec } from './lm/types.js';
export type { ModelCallEvent } from './lm/gateway.js';
export { runToolLoop } from './lm/run-tool-loop.js';
export type { RunToolLoopOptions } from './lm/run-tool-loop.js';
export type { ToolHandler } from './lm/tool-loop.js';

// Tools
export { defineTool, toTool } from './tools/define.js';
export type { AnyTool, ExecutionPolicy, JsonSchemaToolOptions, Tool, ToolContext, ZodToolOptions } from './tools/define.js';
export { calculatorTool, echoTool } from './tools/builtin.js';

// The sandbox on its own
export { Sandbox } from './sandbox/sandbox.js';
export { fileContext } from './sandbox/context-file.js';
export type { FileContext } from './sandbox/context-file.js';
export type { BlockError, BlockWaitingHandler, ExecuteResult, HostCallHandler, SandboxOptions, ToolOptions, Variable } from './sandbox/sandbox.js';
export type { HostCall, HostCallKind } from './sandbox/protocol.js';

// Batches: many tasks, resumable, with cost and accuracy at the end
export { runBatch } from './batch/run-batch.js';
export type { BatchEvent, BatchResult, RunBatchOptions } from './batch/run-batch.js';
export { readTasksFile } from './batch/tasks.js';
export type { BatchTask, OpenAIBatchLine, RlmTaskLine, TaskLine } from './batch/tasks.js';
export { readResults } from './batch/results.js';
export type { OpenAIResultLine, ResultLine, TaskRecord, TaskUsage } from './batch/results.js';
export { loadScorer, SCORERS } from './batch/scorers.js';
export type { ScoreInput, Scorer, ScorerName } from './batch/scorers.js';
export type { BatchSummary } from './batch/summary.js';
export { MemorySpendAccount } from './engine/spend-account.js';
export type { SpendAccount } from './engine/spend-account.js';

// RLM as an OpenAI-compatible model
export { ChatCompletions, splitModelName } from './api/chat-completions.js';
export type { ChatCompletionsOptions } from './api/chat-completions.js';
export type { ChatCompletionRequest, RequestMessage } from './api/request.js';
export type { ChatCompletion, ChatCompletionChunk, RlmExtension } from './api/responses.js';
export { ApiError } from './api/errors.js';
export { serve } from './server/serve.js';
export type { RunningServer, ServeOptions } from './server/serve.js';
