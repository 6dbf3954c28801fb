import { z } from 'zod';
import { DEFAULTS } from '../defaults.js';
import { ConfigurationError, RlmError } from '../errors.js';
import { ModelGateway } from '../lm/gateway.js';
import { DEFAULT_PRICES, findPrice, type PriceTable } from '../lm/prices.js';
import { resolveModelProvider, type ModelProvider } from '../lm/provider.js';
import { KeyedQueues, ModelScheduler } from '../lm/scheduler.js';
import type { ChatRequest, ChatResponse, LanguageModel } from '../lm/types.js';
import { UsageTracker } from '../lm/usage.js';
import { mcpServersSchema } from '../tools/mcp-schema.js';
import { prepareLogFolder } from '../log-folder.js';
import { parseOptions } from '../options.js';
import { workerPool } from '../sandbox/pool.js';
import { sandboxLimitsSchema } from '../sandbox/sandbox.js';
import type { AnyTool } from '../tools/define.js';
import { ToolRegistry } from '../tools/registry.js';
import { loadSetupCode, loadSetupFiles } from '../tools/setup-files.js';
import { EventChannel, resultOf, type IterationRecord, type RlmEvent, type RlmResult } from './events.js';
import { RunFailedError, RunLimitError, TreeBudget, type RunFailureDetails } from './limits.js';
import type { CallerTools } from './caller-tools.js';
import { outputSchemaOf, type OutputSchema, type OutputSchemaSpec } from './output-schema.js';
import { Run } from './run.js';
import type { SpendAccount } from './spend-account.js';
import type { RunSettings, SessionState, TreeShared } from './run-types.js';
import { TrajectoryLogger } from './trajectory.js';

const positive = z.number().int().positive();
const isFunction = (value: unknown) => typeof value === 'function';
const setupCodeEntry = z.union([
  z.string(),
  z.object({ code: z.string(), language: z.enum(['js', 'ts']).optional() }),
  z.object({ file: z.string().min(1) }),
]);

/** The options of `new RLM(...)`, validated when the RLM is built. `RLMOptions` is derived from it. */
const rlmOptionsSchema = z.object({
  /** The root model: it writes the code. */
  model: z.string().min(1, 'name the root model'),
  /** Model for llm_query from code. @default the root model */
  subModel: z.string().min(1).optional(),
  /** One LanguageModel for every model name (e.g. ScriptedModel in tests). */
  languageModel: z.custom<LanguageModel>((value) => isFunction((value as LanguageModel)?.chat), 'expected an object with a chat() method').optional(),
  /** Resolves model names to LanguageModels. @default an OpenAI-compatible client built from baseURL / apiKey */
  provider: z.custom<ModelProvider>((value) => isFunction((value as ModelProvider)?.getModel), 'expected an object with a getModel() method').optional(),
  /** OpenAI-compatible endpoint. @default OPENAI_BASE_URL or OpenAI */
  baseURL: z.string().url().optional(),
  /** @default OPENAI_API_KEY */
  apiKey: z.string().optional(),
  /** Root-model turns before the answer is forced in one more call. @default DEFAULTS.engine.maxIterations */
  maxIterations: positive.default(DEFAULTS.engine.maxIterations),
  /** 1: no recursion (rlm_query acts like llm_query); 2: one level of child RLMs; ... @default DEFAULTS.engine.maxDepth */
  maxDepth: positive.default(DEFAULTS.engine.maxDepth),
  /** Input plus output tokens over the whole run tree. */
  maxTokens: positive.optional(),
  /** USD over the whole run tree (models without a price count as free). */
  maxBudgetUsd: z.number().positive().optional(),
  /** Wall-clock limit for the whole run; interrupts running blocks and model calls. */
  maxTimeMs: positive.optional(),
  /** Iterations in a row whose code failed before the run stops. */
  maxErrors: positive.optional(),
  /** Model calls over the whole run tree. */
  maxLlmCalls: positive.optional(),
  /** Requests in flight at once per model, over the whole tree. @default DEFAULTS.lm.maxConcurrency */
  maxConcurrency: positive.default(DEFAULTS.lm.maxConcurrency),
  /**
   * One per-model request queue for every run of this RLM and of any other RLM given the same
   * scheduler (a batch's tasks): they share its limit per model (its concurrency, not
   * `maxConcurrency`), and a server's retry-after pauses all of their requests to that model.
   * @default a new queue for each run, of `maxConcurrency` slots per model
   */
  scheduler: z.custom<ModelScheduler>((value) => value instanceof ModelScheduler, 'expected a ModelScheduler').optional(),
  /**
   * Money shared with other runs (a batch's): each model call is checked against what is left and
   * charged its cost; a run whose call finds it spent stops with `max_budget`. Needs prices, as
   * `maxBudgetUsd` does.
   */
  spendAccount: z
    .custom<SpendAccount>((value) => isFunction((value as SpendAccount)?.remaining) && isFunction((value as SpendAccount)?.charge), 'expected an object with remaining() and charge() methods')
    .optional(),
  /** Child RLMs running at once per depth. @default DEFAULTS.engine.maxConcurrentChildren */
  maxConcurrentChildren: positive.default(DEFAULTS.engine.maxConcurrentChildren),
  /** Model calls one tool-calling loop may make. @default DEFAULTS.lm.maxToolIterations */
  maxToolIterations: positive.default(DEFAULTS.lm.maxToolIterations),
  /** Tokens the root model can read; sets when conversations are compacted. @default from a table of known models, else 32768 */
  contextWindow: positive.optional(),
  /**
   * Compacts a root conversation that reaches `thresholdPct` of the context window: the root model
   * summarizes, the summary replaces the older turns, and they stay readable in the REPL as
   * `history`. false: never; a conversation that would overflow then ends the run (`context_window`).
   * @default { thresholdPct: 85 }
   */
  compaction: z.union([z.literal(false), z.object({ thresholdPct: z.number().gt(0).lte(100).default(DEFAULTS.engine.compactionThresholdPct) })]).default({ thresholdPct: DEFAULTS.engine.compactionThresholdPct }),
  /** Replaces the built-in system prompt (prompts/system.md). */
  systemPrompt: z.string().optional(),
  /** Limits of each run's sandbox: heap (MB), time per block (ms), printed characters per block, ... */
  sandbox: sandboxLimitsSchema.default(sandboxLimitsSchema.parse({})),
  /** Setup code run in the sandbox before the first block: JavaScript, TypeScript, or a file of either. */
  setupCode: z.union([setupCodeEntry, z.array(setupCodeEntry)]).optional(),
  /** Host tools model code can call: tools.NAME(args), tool_handler(name, args), llm_query(..., { tools: TOOLS, tool_handler }). */
  tools: z.array(z.custom<AnyTool>((value) => isFunction((value as AnyTool)?.validate), 'expected tools made with defineTool()')).optional(),
  /**
   * MCP servers whose tools become host tools, in the `mcpServers` format assistants use:
   * `{ NAME: { command, args?, env?, cwd? } | { url, headers? } }`. Started once per process.
   */
  mcpServers: mcpServersSchema.optional(),
  /** Setup files (TypeScript or JavaScript modules) exporting `tools` and/or `sandboxSetup`. */
  setup: z.array(z.string().min(1)).optional(),
  /** Prices (USD per million tokens) added to or replacing the built-in table. */
  prices: z.record(z.string(), z.object({ inputPerMillion: z.number().nonnegative(), outputPerMillion: z.number().nonnegative() })).optional(),
  /** Write a JSONL trajectory of every run into this folder (checked, and created, when the RLM is built). */
  logDir: z.string().min(1).optional(),
  /** Time one model request may take, from the request to the last byte of the reply, in ms (OpenAI-compatible models). @default DEFAULTS.lm.requestTimeoutMs */
  requestTimeoutMs: positive.optional(),
  /** Longest silence in a model's reply (no bytes), in ms, before the request is cut and retried. @default DEFAULTS.lm.idleTimeoutMs */
  idleTimeoutMs: positive.optional(),
  /** Awaited after every root iteration, so a durable step runner can checkpoint each step. */
  onIteration: z.custom<(iteration: IterationRecord, index: number) => unknown>(isFunction, 'expected a function').optional(),
  /** Called after every sub-call a run's code makes (llm_query and friends), anywhere in the tree. */
  onRequest: z.custom<(request: Omit<ChatRequest, 'signal'>, response: ChatResponse | undefined) => void>(isFunction, 'expected a function').optional(),
});

/** Options of `new RLM(...)`; see each field for its meaning and default. */
export type RLMOptions = z.input<typeof rlmOptionsSchema>;
export type { SetupCode } from '../tools/setup-files.js';

/**
 * What to answer: a context to explore and a question about it. A plain string is the context.
 * `callerTools` are tools the caller runs itself: their calls are handed back and awaited.
 * `output` is the schema of the answer (a zod schema or a JSON Schema object): the result's
 * `output` is then the answer's value, checked against it, and `response` its JSON text.
 */
export type CompletionInput<Output extends OutputSchemaSpec | undefined = OutputSchemaSpec | undefined> =
  | string
  | { context?: unknown; query?: string; signal?: AbortSignal; callerTools?: CallerTools; output?: Output };

export type { OutputSchemaSpec } from './output-schema.js';

/** A completion's result: with a zod schema as `output`, `output` has the schema's type. */
export type CompletionResult<Output extends OutputSchemaSpec | undefined = undefined> = [Output] extends [undefined]
  ? RlmResult
  : RlmResult & { output: Output extends z.ZodType ? z.output<Output> : unknown };

/** What `RLM.prepare()` found: the tools model code will have, and what went wrong without stopping runs. */
export interface PreparedRLM {
  /** Names of the host tools model code can call: given, from setup files, and from MCP servers. */
  tools: string[];
  /** Problems that do not stop runs (an MCP server that did not start). */
  warnings: string[];
}

/** One completion of an RLM: its input, its session (if any), and what measures and reports it. */
interface Completion {
  input: NormalizedInput;
  session: SessionState | undefined;
  usage: UsageTracker;
  budget: TreeBudget;
  channel: EventChannel<RlmEvent>;
}

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
  readonly #options: z.output<typeof rlmOptionsSchema>;
  readonly #models: ModelProvider;
  readonly #settings: Omit<RunSettings, 'tools' | 'warnings'>;
  #prepared: Promise<RunSettings> | undefined;

  constructor(options: RLMOptions) {
    this.#options = parseOptions(rlmOptionsSchema, options, 'RLM options');
    if (this.#options.logDir) prepareLogFolder(this.#options.logDir);
    if (this.#options.maxBudgetUsd !== undefined || this.#options.spendAccount) requirePrices([this.#options.model, this.#options.subModel ?? this.#options.model], this.#prices());
    this.#models = resolveModelProvider(this.#options);
    this.#settings = settingsOf(this.#options);
  }

  /**
   * Runs to the final answer. Limit errors (RunLimitError) carry the partial answer and usage. With
   * `output`, an answer that never matches the schema fails the run with code `invalid_output`.
   */
  async completion<Output extends OutputSchemaSpec | undefined = undefined>(input: CompletionInput<Output>): Promise<CompletionResult<Output>> {
    return (await resultOf(this.stream(input))) as CompletionResult<Output>;
  }

  /** Runs and yields every event as it happens; the last one is `run-end` (or the stream throws). */
  stream(input: CompletionInput): AsyncIterable<RlmEvent> {
    return this.#startRun(input, undefined);
  }

  /**
   * A conversation that keeps its sandbox: later contexts arrive as context_1, context_2, ...,
   * earlier conversations as history_0, history_1, ... Close it when done.
   */
  session(): RlmSession {
    const state: SessionState = { sandbox: undefined, contexts: 0, histories: 0 };
    return new RlmSession({
      stream: (input) => this.#startRun(input, state),
      close: async () => {
        await state.sandbox?.dispose();
        state.sandbox = undefined;
      },
    });
  }

  /**
   * Loads setup files and builds the tool registry (once; later runs reuse it). Called by the first
   * run; call it yourself to surface setup errors before running.
   */
  async prepare(): Promise<PreparedRLM> {
    const { tools, warnings } = await this.#runSettings();
    return { tools: tools.names(), warnings: [...warnings] };
  }

  #runSettings(): Promise<RunSettings> {
    this.#prepared ??= (async () => {
      const contribution = await loadSetupFiles(this.#options.setup ?? []);
      const ownTools = [...(this.#options.tools ?? []), ...contribution.tools];
      const mcp = this.#options.mcpServers ? await (await import('../tools/mcp-tools.js')).loadMcpTools(this.#options.mcpServers, ownTools.map((tool) => tool.name)) : { tools: [], problems: [] };
      const registry = new ToolRegistry([...ownTools, ...mcp.tools]);
      return { ...this.#settings, tools: registry, setupCode: [...this.#settings.setupCode, ...contribution.sandboxSetup], warnings: mcp.problems };
    })();
    return this.#prepared;
  }

  /** Starts a run (of a session, when `session` is given) and returns its events. */
  #startRun(input: CompletionInput, session: SessionState | undefined): AsyncIterable<RlmEvent> {
    const normalized = normalizeInput(input);
    const usage = new UsageTracker(this.#prices());
    const budget = new TreeBudget(this.#options, usage, normalized.signal);
    // A consumer that stops reading (`break`) cancels the run: nobody would see its result.
    const channel = new EventChannel<RlmEvent>(() => budget.stop(new Error('the event stream was closed before the run ended')));
    void this.#complete({ input: normalized, session, usage, budget, channel });
    return channel;
  }

  /** Runs the root run of one completion to its end, reporting into its channel; never throws. */
  async #complete({ input, session, usage, budget, channel }: Completion): Promise<void> {
    const started = performance.now();
    // Every run needs a sandbox, and each child run one more: have their processes started ahead of time.
    if (this.#settings.sandbox.isolation === 'process') workerPool.reserve(this.#settings.maxDepth > 1 ? this.#settings.maxConcurrentChildren + 1 : 1);
    else workerPool.refill();
    let logger: TrajectoryLogger | undefined;
    let run: Run | undefined;
    try {
      logger = this.#startLog(input);
      const settings = await this.#runSettings();
      const gateway = new ModelGateway({ models: this.#models, scheduler: this.#options.scheduler ?? new ModelScheduler(this.#options.maxConcurrency), usage, guard: budget, signal: budget.signal });
      const shared: TreeShared = {
        settings,
        budget,
        emit: (event: RlmEvent) => channel.push(event),
        onRequest: this.#options.onRequest,
        childQueues: new KeyedQueues<number>(settings.maxConcurrentChildren),
      };
      const placement = { logger, onIteration: this.#options.onIteration, callerTools: input.callerTools, ...(session && { session }) };
      run = new Run({ shared, gateway, depth: 0, rootModel: settings.rootModel, placement });
      const { runId } = run;
      const outcome = await run.complete({ context: input.context, query: input.query, output: input.output });
      if (session) session.lastMessages = outcome.messages;
      const result: RlmResult = {
        response: outcome.response,
        ...(input.output && { output: outcome.output }),
        forced: outcome.forced,
        usage: usage.summary(),
        iterations: outcome.iterations,
        durationMs: performance.now() - started,
        trajectory: outcome.trajectory,
        runId,
        ...(logger && { logPath: logger.path }),
      };
      logger?.end({ status: 'completed', answer: result.response, forced: result.forced, usage: result.usage });
      channel.push({ type: 'run-end', runId, depth: 0, result });
      channel.close();
    } catch (error) {
      this.#fail(error, { run, logger, usage, budget, channel });
    } finally {
      budget.dispose();
    }
  }

  /** Reports a failed completion: in its log, as its last event, and as what its stream throws. */
  #fail(error: unknown, { run, logger, usage, budget, channel }: Omit<Completion, 'input' | 'session'> & { run: Run | undefined; logger: TrajectoryLogger | undefined }): void {
    const failure = failureOf(error, { partialAnswer: run?.partialAnswer, usage: usage.summary(), logPath: logger?.path }, budget);
    const { name, message } = failure instanceof Error ? failure : new Error(String(failure));
    const code = failure instanceof RlmError ? failure.code : undefined;
    const status = failure instanceof RunLimitError ? 'limit' : failure instanceof RunFailedError ? 'error' : 'interrupted';
    const partialAnswer = failure instanceof RunFailedError ? failure.partialAnswer : undefined;
    logger?.end({ status, error: { name, code, message }, partialAnswer, usage: usage.summary() });
    channel.push({ type: 'error', runId: run?.runId ?? '', depth: 0, error: { name, message, ...(code && { code }) } });
    channel.fail(failure);
  }

  #prices(): PriceTable {
    return { ...DEFAULT_PRICES, ...this.#options.prices };
  }

  #startLog({ query, output }: NormalizedInput): TrajectoryLogger | undefined {
    if (!this.#options.logDir) return undefined;
    const logger = new TrajectoryLogger(this.#options.logDir, [...(this.#models.secrets ?? []), ...(this.#options.apiKey ? [this.#options.apiKey] : [])]);
    logger.metadata({
      rootModel: this.#settings.rootModel,
      subModel: this.#settings.subModel,
      maxDepth: this.#settings.maxDepth,
      maxIterations: this.#settings.maxIterations,
      baseURL: this.#options.baseURL ?? this.#models.baseURL,
      sandbox: { ...this.#settings.sandbox },
      query,
      outputSchema: output?.jsonSchema,
    });
    return logger;
  }
}

/** A multi-turn conversation over one sandbox (see `RLM.session()`). */
export class RlmSession {
  readonly #turns: { stream(input: CompletionInput): AsyncIterable<RlmEvent>; close(): Promise<void> };

  /** Sessions are made by `RLM.session()`, which gives them its way to start runs. */
  constructor(turns: { stream(input: CompletionInput): AsyncIterable<RlmEvent>; close(): Promise<void> }) {
    this.#turns = turns;
  }

  /** Runs one turn of the conversation to its answer (consumes `stream()`); `output` as in `RLM.completion`. */
  async completion<Output extends OutputSchemaSpec | undefined = undefined>(input: CompletionInput<Output>): Promise<CompletionResult<Output>> {
    return (await resultOf(this.stream(input))) as CompletionResult<Output>;
  }

  /** Runs one turn of the conversation and yields its events. */
  stream(input: CompletionInput): AsyncIterable<RlmEvent> {
    return this.#turns.stream(input);
  }

  /** Stops the session's sandbox. */
  close(): Promise<void> {
    return this.#turns.close();
  }
}

/** The settings every run of an RLM shares, but its tools (see RLM.prepare). */
function settingsOf(options: z.output<typeof rlmOptionsSchema>): Omit<RunSettings, 'tools' | 'warnings'> {
  const { setupCode } = options;
  return {
    rootModel: options.model,
    subModel: options.subModel ?? options.model,
    maxIterations: options.maxIterations,
    maxDepth: options.maxDepth,
    maxErrors: options.maxErrors,
    maxToolIterations: options.maxToolIterations,
    maxConcurrentChildren: options.maxConcurrentChildren,
    systemPrompt: options.systemPrompt,
    sandbox: options.sandbox,
    contextWindow: options.contextWindow,
    compaction: options.compaction,
    setupCode: loadSetupCode(setupCode === undefined ? [] : Array.isArray(setupCode) ? setupCode : [setupCode]),
  };
}

/**
 * What a failed run throws: what stopped it, with what it had (partial answer, usage, log). A run
 * cancelled by its caller (or whose event stream was closed) rejects with that reason as it is.
 */
function failureOf(error: unknown, details: RunFailureDetails, budget: TreeBudget): unknown {
  const cancelled = budget.signal.aborted && !(budget.signal.reason instanceof RunLimitError) && error === budget.signal.reason;
  return cancelled ? error : RunFailedError.from(error, details);
}

/** A budget needs a price for every model it pays for: refuse one that would silently count as free. */
function requirePrices(models: string[], prices: PriceTable): void {
  const unpriced = [...new Set(models)].filter((model) => !findPrice(model, prices));
  if (unpriced.length === 0) return;
  throw new ConfigurationError(
    `A budget (--max-budget, maxBudgetUsd) needs prices, and ${unpriced.map((model) => `"${model}"`).join(' and ')} ${unpriced.length === 1 ? 'has' : 'have'} none. ` +
      `Give them with --price MODEL=IN,OUT (USD per million input and output tokens, e.g. --price ${unpriced[0]}=0.5,2) or the prices option.`,
  );
}

interface NormalizedInput {
  context: unknown;
  query: string | undefined;
  signal: AbortSignal | undefined;
  callerTools: CallerTools | undefined;
  output: OutputSchema | undefined;
}

/** The input of one completion; an output schema that cannot be used is refused here, before anything runs. */
function normalizeInput(input: CompletionInput): NormalizedInput {
  if (typeof input === 'string') return { context: input, query: undefined, signal: undefined, callerTools: undefined, output: undefined };
  if (input === null || typeof input !== 'object') throw new ConfigurationError('completion() takes a string or { context, query }');
  return { context: input.context ?? '', query: input.query, signal: input.signal, callerTools: input.callerTools, output: outputSchemaOf(input.output) };
}
