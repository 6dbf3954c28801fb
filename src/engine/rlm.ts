import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { DEFAULTS } from '../defaults.js';
import { ConfigurationError } from '../errors.js';
import { ModelGateway } from '../lm/gateway.js';
import { OpenAIModel } from '../lm/openai.js';
import { DEFAULT_PRICES, type PriceTable } from '../lm/prices.js';
import { ModelScheduler } from '../lm/scheduler.js';
import type { ChatRequest, ChatResponse, LanguageModel } from '../lm/types.js';
import { UsageTracker } from '../lm/usage.js';
import { parseOptions } from '../options.js';
import { workerPool } from '../sandbox/pool.js';
import { sandboxLimitsSchema } from '../sandbox/sandbox.js';
import type { AnyTool } from '../tools/define.js';
import { ToolRegistry } from '../tools/registry.js';
import { loadSetupFiles } from '../tools/setup-files.js';
import { EventChannel, type IterationRecord, type RlmEvent, type RlmResult } from './events.js';
import { RunLimitError, TreeBudget } from './limits.js';
import { Run, type RunSettings, type SessionState } from './run.js';
import { TrajectoryLogger } from './trajectory.js';
import { transpileTypeScript } from './typescript.js';

/** Setup code run in the sandbox before the first block: JavaScript, TypeScript, or a file of either. */
export type SetupCode = string | { code: string; language?: 'js' | 'ts' } | { file: string };

export interface RLMOptions {
  /** The root model: it writes the code. */
  model: string;
  /** Model for llm_query from code. @default the root model */
  subModel?: string;
  /** Any LanguageModel (e.g. ScriptedModel in tests). @default an OpenAIModel built from baseURL / apiKey */
  languageModel?: LanguageModel;
  /** OpenAI-compatible endpoint. @default OPENAI_BASE_URL or OpenAI */
  baseURL?: string;
  /** @default OPENAI_API_KEY */
  apiKey?: string;
  /** Root-model turns before the answer is forced in one more call. @default 30 */
  maxIterations?: number;
  /** 1: no recursion (rlm_query acts like llm_query); 2: one level of child RLMs; ... @default 1 */
  maxDepth?: number;
  /** Input plus output tokens over the whole run tree. */
  maxTokens?: number;
  /** USD over the whole run tree (models without a price count as free). */
  maxBudgetUsd?: number;
  /** Wall-clock limit for the whole run; interrupts running blocks and model calls. */
  maxTimeMs?: number;
  /** Iterations in a row whose code failed before the run stops. */
  maxErrors?: number;
  /** Model calls over the whole run tree. */
  maxLlmCalls?: number;
  /** Requests in flight at once per model, over the whole tree. @default 16 */
  maxConcurrency?: number;
  /** Child RLMs running at once per depth. @default 4 */
  maxConcurrentChildren?: number;
  /** Model calls one tool-calling loop may make. @default 10 */
  maxToolIterations?: number;
  /** Replaces the built-in system prompt (prompts/system.md). */
  systemPrompt?: string;
  sandbox?: { memoryLimitMb?: number; blockTimeoutMs?: number; outputLimitChars?: number; maxHostCallChars?: number };
  setupCode?: SetupCode | SetupCode[];
  /** Host tools model code can call: tools.NAME(args), tool_handler(name, args), llm_query(..., { tools: TOOLS, tool_handler }). */
  tools?: AnyTool[];
  /** Setup files (TypeScript or JavaScript modules) exporting `tools` and/or `sandboxSetup`. */
  setup?: string[];
  /** Prices (USD per million tokens) added to or replacing the built-in table. */
  prices?: PriceTable;
  /** Write a JSONL trajectory of every run into this folder. */
  logDir?: string;
  /** Awaited after every root iteration, so a durable step runner can checkpoint each step. */
  onIteration?: (iteration: IterationRecord, index: number) => unknown;
  /** Called after every sub-call a run's code makes (llm_query and friends), anywhere in the tree. */
  onRequest?: (request: Omit<ChatRequest, 'signal'>, response: ChatResponse | undefined) => void;
}

/** What to answer: a context to explore and a question about it. A plain string is the context. */
export type CompletionInput = string | { context?: unknown; query?: string; signal?: AbortSignal };

const positive = z.number().int().positive();
const optionsSchema = z.object({
  model: z.string().min(1, 'name the root model'),
  subModel: z.string().min(1).optional(),
  languageModel: z.custom<LanguageModel>((value) => typeof (value as LanguageModel)?.chat === 'function', 'expected an object with a chat() method').optional(),
  baseURL: z.string().url().optional(),
  apiKey: z.string().optional(),
  maxIterations: positive.default(DEFAULTS.engine.maxIterations),
  maxDepth: positive.default(DEFAULTS.engine.maxDepth),
  maxTokens: positive.optional(),
  maxBudgetUsd: z.number().positive().optional(),
  maxTimeMs: positive.optional(),
  maxErrors: positive.optional(),
  maxLlmCalls: positive.optional(),
  maxConcurrency: positive.default(DEFAULTS.lm.maxConcurrency),
  maxConcurrentChildren: positive.default(DEFAULTS.engine.maxConcurrentChildren),
  maxToolIterations: positive.default(DEFAULTS.lm.maxToolIterations),
  systemPrompt: z.string().optional(),
  sandbox: sandboxLimitsSchema.default(sandboxLimitsSchema.parse({})),
  setupCode: z.unknown().optional(),
  tools: z.array(z.custom<AnyTool>((value) => typeof (value as AnyTool)?.validate === 'function', 'expected tools made with defineTool()')).optional(),
  setup: z.array(z.string().min(1)).optional(),
  prices: z.record(z.string(), z.object({ inputPerMillion: z.number().nonnegative(), outputPerMillion: z.number().nonnegative() })).optional(),
  logDir: z.string().min(1).optional(),
  onIteration: z.custom<RLMOptions['onIteration']>((value) => typeof value === 'function', 'expected a function').optional(),
  onRequest: z.custom<RLMOptions['onRequest']>((value) => typeof value === 'function', 'expected a function').optional(),
});

/**
 * A Recursive Language Model: answers a query about a context of any size by letting the root model
 * program a sandboxed JavaScript REPL that holds the context.
 *
 * @example
 * const rlm = new RLM({ model: 'gpt-5-mini', subModel: 'gpt-5-nano' });
 * const result = await rlm.completion({ context: hugeText, query: 'Who signed the contract?' });
 * console.log(result.response, result.usage.costUsd);
 */
export class RLM {
  private readonly options: RLMOptions;
  private readonly model: LanguageModel;
  private readonly settings: Omit<RunSettings, 'tools'>;
  private prepared: Promise<RunSettings> | undefined;

  constructor(options: RLMOptions) {
    const parsed = parseOptions(optionsSchema, options, 'RLM options');
    this.options = { ...options, ...parsed } as RLMOptions;
    this.model = options.languageModel ?? new OpenAIModel({ ...(options.baseURL && { baseURL: options.baseURL }), ...(options.apiKey && { apiKey: options.apiKey }) });
    const sandbox = parsed.sandbox;
    this.settings = {
      rootModel: parsed.model,
      subModel: parsed.subModel ?? parsed.model,
      maxIterations: parsed.maxIterations,
      maxDepth: parsed.maxDepth,
      maxErrors: parsed.maxErrors,
      maxToolIterations: parsed.maxToolIterations,
      maxConcurrentChildren: parsed.maxConcurrentChildren,
      systemPrompt: parsed.systemPrompt,
      sandbox,
      setupCode: loadSetupCode(options.setupCode),
    };
  }

  /** Runs to the final answer. Limit errors (RunLimitError) carry the partial answer and usage. */
  async completion(input: CompletionInput): Promise<RlmResult> {
    return resultOf(this.stream(input));
  }

  /** Runs and yields every event as it happens; the last one is `run-end` (or the stream throws). */
  stream(input: CompletionInput): AsyncIterable<RlmEvent> {
    return this.startRun(input, undefined);
  }

  /**
   * A conversation that keeps its sandbox: later contexts arrive as context_1, context_2, ...,
   * earlier conversations as history_0, history_1, ... Close it when done.
   */
  session(): RlmSession {
    return new RlmSession(this);
  }

  /**
   * Loads setup files and builds the tool registry (once; later runs reuse it). Called by the first
   * run; call it yourself to surface setup errors before running.
   */
  prepare(): Promise<RunSettings> {
    this.prepared ??= (async () => {
      const contribution = await loadSetupFiles(this.options.setup ?? []);
      const registry = new ToolRegistry([...(this.options.tools ?? []), ...contribution.tools]);
      return { ...this.settings, tools: registry, setupCode: [...this.settings.setupCode, ...contribution.sandboxSetup] };
    })();
    return this.prepared;
  }

  /** @internal */
  startRun(input: CompletionInput, session: SessionState | undefined): AsyncIterable<RlmEvent> {
    const { context, query, signal } = normalizeInput(input);
    const usage = new UsageTracker({ ...DEFAULT_PRICES, ...this.options.prices });
    const budget = new TreeBudget(this.options, usage, signal);
    // A consumer that stops reading (`break`) cancels the run: nobody would see its result.
    const channel = new EventChannel<RlmEvent>(() => budget.stop(new Error('the event stream was closed before the run ended')));
    // Every run needs a sandbox, and each child run one more: have them started ahead of time.
    workerPool.reserve(this.settings.maxDepth > 1 ? this.settings.maxConcurrentChildren + 1 : 1);
    const logger = this.options.logDir ? new TrajectoryLogger(this.options.logDir, [this.options.apiKey ?? '', process.env.OPENAI_API_KEY ?? '']) : undefined;
    logger?.metadata({
      rootModel: this.settings.rootModel,
      subModel: this.settings.subModel,
      maxDepth: this.settings.maxDepth,
      maxIterations: this.settings.maxIterations,
      baseURL: this.options.baseURL,
      sandbox: { ...this.settings.sandbox },
    });
    const gateway = new ModelGateway({
      model: this.model,
      scheduler: new ModelScheduler(this.options.maxConcurrency),
      usage,
      guard: budget,
      signal: budget.signal,
    });
    const started = performance.now();
    let runId = randomUUID();
    void this.prepare()
      .then((settings) => {
        const tree = {
          settings,
          budget,
          emit: (event: RlmEvent) => channel.push(event),
          onRequest: this.options.onRequest,
          childQueues: new Map(),
        };
        const run = new Run(tree, gateway, 0, settings.rootModel, {
          logger,
          onIteration: this.options.onIteration,
          ...(session && { session }),
        });
        runId = run.runId;
        return run.execute({ context, query });
      })
      .then((outcome) => {
        const result: RlmResult = {
          response: outcome.response,
          forced: outcome.forced,
          usage: usage.summary(),
          iterations: outcome.iterations,
          durationMs: performance.now() - started,
          trajectory: outcome.trajectory,
          runId,
          ...(logger && { logPath: logger.path }),
        };
        if (session) session.lastMessages = outcome.messages;
        channel.push({ type: 'run-end', runId, depth: 0, result });
        channel.close();
      })
      .catch((error: unknown) => {
        if (error instanceof RunLimitError) error.usage = usage.summary();
        const described = error instanceof Error ? error : new Error(String(error));
        channel.push({
          type: 'error',
          runId,
          depth: 0,
          error: { name: described.name, message: described.message, ...('code' in described && { code: String(described.code) }) },
        });
        channel.fail(error);
      })
      .finally(() => budget.dispose());
    return channel;
  }

}

/** Consumes a run's events and returns what its run-end event carries. */
async function resultOf(events: AsyncIterable<RlmEvent>): Promise<RlmResult> {
  for await (const event of events) if (event.type === 'run-end') return event.result;
  throw new Error('the run ended without a result');
}

/** A multi-turn conversation over one sandbox (see `RLM.session()`). */
export class RlmSession {
  private readonly state: SessionState = { sandbox: undefined, contexts: 0, histories: 0 };

  constructor(private readonly rlm: RLM) {}

  /** Runs one turn of the conversation to its answer (consumes `stream()`). */
  async completion(input: CompletionInput): Promise<RlmResult> {
    return resultOf(this.stream(input));
  }

  stream(input: CompletionInput): AsyncIterable<RlmEvent> {
    return this.rlm.startRun(input, this.state);
  }

  /** Stops the session's sandbox. */
  async close(): Promise<void> {
    await this.state.sandbox?.dispose();
    this.state.sandbox = undefined;
  }
}

function normalizeInput(input: CompletionInput): { context: unknown; query: string | undefined; signal: AbortSignal | undefined } {
  if (typeof input === 'string') return { context: input, query: undefined, signal: undefined };
  if (input === null || typeof input !== 'object') throw new ConfigurationError('completion() takes a string or { context, query }');
  return { context: input.context ?? '', query: input.query, signal: input.signal };
}

function loadSetupCode(setup: SetupCode | SetupCode[] | undefined): string[] {
  if (setup === undefined) return [];
  return (Array.isArray(setup) ? setup : [setup]).map((entry) => {
    if (typeof entry === 'string') return entry;
    if ('file' in entry) {
      let code: string;
      try {
        code = readFileSync(entry.file, 'utf8');
      } catch (error) {
        throw new ConfigurationError(`Cannot read setup code file ${entry.file}: ${(error as Error).message}`);
      }
      return /\.[cm]?ts$/.test(entry.file) ? transpileSetup(code, entry.file) : code;
    }
    return entry.language === 'ts' ? transpileSetup(entry.code, 'setup code') : entry.code;
  });
}

function transpileSetup(code: string, label: string): string {
  try {
    return transpileTypeScript(code);
  } catch (error) {
    throw new ConfigurationError(`${label} is not valid TypeScript: ${(error as Error).message}`);
  }
}
