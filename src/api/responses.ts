import { randomUUID } from 'node:crypto';
import { RunFailedError, RunLimitError } from '../engine/limits.js';
import { describeError, RlmError } from '../errors.js';
import type { ToolCall } from '../lm/types.js';
import type { RunStep, Spent, TokenCount } from './active-run.js';
import { ApiError } from './errors.js';

type Step = Exclude<RunStep, { type: 'failed' }>;
type FinishReason = 'stop' | 'length' | 'tool_calls';

/**
 * The `rlm` extension object every completion carries, so a caller can tell how its answer came
 * about: `forced` when the run used all its iterations and the answer was asked for in one last
 * call (then `finish_reason` is "length"), the root iterations, and the USD this response's calls
 * cost (null when a model has no price).
 */
export interface RlmExtension {
  forced: boolean;
  iterations: number;
  cost_usd: number | null;
}

function extensionOf(step: Step, spent: Spent): RlmExtension {
  return { forced: step.type === 'answer' && step.forced, iterations: step.iterations, cost_usd: spent.costUsd };
}

/**
 * A forced answer is cut short by the iteration limit: OpenAI says "length" for an answer cut by its
 * limit. A structured answer is whole JSON that matched its schema, forced or not: "stop" (clients
 * such as the openai SDK's `parse()` refuse "length"); `rlm.forced` still tells.
 */
function finishReasonOf(step: Step): FinishReason {
  if (step.type === 'tool-calls') return 'tool_calls';
  return step.forced && !step.structured ? 'length' : 'stop';
}

/** An answer or a hand-back of tool calls, as OpenAI's chat.completion object. */
export function completionOf(step: Step, model: string, spent: Spent) {
  const message =
    step.type === 'answer'
      ? { role: 'assistant' as const, content: step.answer, refusal: null }
      : { role: 'assistant' as const, content: null, refusal: null, tool_calls: step.calls.map(wireToolCall) };
  return {
    id: completionId(),
    object: 'chat.completion' as const,
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message, finish_reason: finishReasonOf(step), logprobs: null }],
    usage: spent.usage,
    rlm: extensionOf(step, spent),
  };
}

export type ChatCompletion = ReturnType<typeof completionOf>;

/** One chunk of a streamed completion, as OpenAI sends it; the one with the finish reason carries `rlm`. */
export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: { index: number; delta: ChunkDelta; finish_reason: FinishReason | null; logprobs: null }[];
  usage?: TokenCount;
  rlm?: RlmExtension;
}

/** The chunks that stream a step: content or tool calls (name first, arguments after), then the finish with the `rlm` object. */
export function* chunksOf(id: string, step: Step, model: string, spent: Spent): Generator<ChatCompletionChunk> {
  if (step.type === 'answer') {
    for (const piece of pieces(step.answer)) yield chunk(id, model, { content: piece });
  } else {
    for (const [index, call] of step.calls.entries()) {
      yield chunk(id, model, { tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }] });
      for (const piece of pieces(call.arguments)) yield chunk(id, model, { tool_calls: [{ index, function: { arguments: piece } }] });
    }
  }
  yield { ...chunk(id, model, {}, finishReasonOf(step)), rlm: extensionOf(step, spent) };
}

/** What one streamed chunk adds to the message, as OpenAI sends it. */
interface ChunkDelta {
  role?: 'assistant';
  content?: string;
  tool_calls?: { index: number; id?: string; type?: 'function'; function: { name?: string; arguments: string } }[];
}

export function chunk(id: string, model: string, delta: ChunkDelta, finishReason: FinishReason | null = null, usage?: TokenCount): ChatCompletionChunk {
  return {
    id,
    object: 'chat.completion.chunk' as const,
    created: Math.floor(Date.now() / 1000),
    model,
    choices: usage ? [] : [{ index: 0, delta, finish_reason: finishReason, logprobs: null }],
    ...(usage && { usage }),
  };
}

export function completionId(): string {
  return `chatcmpl-rlm-${randomUUID()}`;
}

/**
 * Why a run failed, as an API error: the upstream model (502), a limit or an answer that never
 * matched `response_format` (422), anything else (500).
 */
export function failureAsApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  const partial = error instanceof RunFailedError && error.partialAnswer ? { rlm_partial_answer: error.partialAnswer } : {};
  const code = error instanceof RlmError ? error.code : 'run_failed';
  const { message } = describeError(error);
  if (error instanceof RunLimitError) return new ApiError(422, 'invalid_request_error', `The run stopped at a limit: ${message}`, null, code, partial);
  if (code === 'invalid_output') return new ApiError(422, 'invalid_request_error', `The run found no answer matching response_format: ${message}`, 'response_format', code, partial);
  if (code === 'model_error') return new ApiError(502, 'upstream_error', `The upstream model failed: ${message}`, null, code, partial);
  return new ApiError(500, 'server_error', `The run failed: ${message}`, null, code, partial);
}

function wireToolCall(call: ToolCall) {
  return { id: call.id, type: 'function' as const, function: { name: call.name, arguments: call.arguments } };
}

/** Long texts stream in several chunks, as a model's would. */
function pieces(text: string, size = 1_000): string[] {
  if (text.length <= size) return [text];
  const result: string[] = [];
  for (let start = 0; start < text.length; start += size) result.push(text.slice(start, start + size));
  return result;
}
