import { z } from 'zod';
import { ConfigurationError, SandboxError } from '../errors.js';
import { parseOptions } from '../options.js';
import type { ExecuteResult } from './block-result.js';
import { BlockRunner } from './block-runner.js';
import type { BlockWaitingHandler } from './host-call-bridge.js';
import { workerPool, type Isolation } from './pool.js';
import { sandboxLimitsSchema } from './sandbox-limits.js';
import type { HostCallHandler } from './serve-host-call.js';
import { WorkerReplay, type BlockOutputSchema } from './worker-replay.js';

export type { BlockError, ExecuteResult, Variable } from './block-result.js';
export type { BlockWaitingHandler } from './host-call-bridge.js';
export type { BlockOutputSchema } from './worker-replay.js';
export { sandboxLimitsSchema } from './sandbox-limits.js';
export type { HostCallHandler } from './serve-host-call.js';
export type { Isolation } from './pool.js';

export interface ToolOptions {
  /**
   * Tools answered asynchronously: in the sandbox, `tools.NAME(args)` returns a promise of the
   * result and `tool_handler(NAME, args)` a promise of its text, so a block can have many calls
   * out at once (`await Promise.all(...)`). They reach `onHostCall` as ordinary `tool_call`s.
   */
  asyncTools?: string[];
}

/** `Scope` is what `execute` hands, per block, to `onHostCall` and `onBlockWaiting`. */
export interface SandboxOptions<Scope = unknown> {
  /** Heap limit of the isolate in MB; the context counts against it. @default 1024 */
  memoryLimitMb?: number;
  /** Execution time one block may use, not counting time spent waiting for host calls. @default 60000 */
  blockTimeoutMs?: number;
  /** Characters one block may print before the rest is cut with a marker. @default 20000 */
  outputLimitChars?: number;
  /** Characters of JSON one call from model code to the host may carry; a larger one fails in the sandbox with a RangeError. @default 134217728 (128 Mi) */
  maxHostCallChars?: number;
  /**
   * Resident memory of the worker process, in MB, past which the sandbox is reset. A backstop for
   * memory the isolate's heap limit does not see. In a shared process the process is held to the sum
   * of its sandboxes' limits, and the sandbox whose block runs while it grows past that is reset.
   * @default twice the heap limit plus twice the loaded contexts plus 512
   */
  rssLimitMb?: number;
  /**
   * `isolate`: a fresh V8 isolate of its own (own heap and heap limit, own built-ins) in a worker
   * process shared with other sandboxes; a catastrophic allocation that takes that process down
   * ends every sandbox it hosts (their blocks fail with SandboxCrashedError naming the cause).
   * `process`: a worker process of its own, never reused. @default 'isolate'
   */
  isolation?: Isolation;
  /** Serves `llm_query`, `llm_query_batched`, `rlm_query`, `rlm_query_batched` and `tool_handler`. */
  onHostCall?: HostCallHandler<Scope>;
  /** Called each time a block waits for its asynchronous tool calls (see `setTools`). */
  onBlockWaiting?: BlockWaitingHandler<Scope>;
}

const optionsSchema = sandboxLimitsSchema.extend({
  onHostCall: z.custom<HostCallHandler>((value) => typeof value === 'function', 'expected a function').optional(),
  onBlockWaiting: z.custom<BlockWaitingHandler>((value) => typeof value === 'function', 'expected a function').optional(),
});

const GLOBAL_NAME = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/**
 * A persistent JavaScript REPL for model-written code, isolated in a V8 isolate of its own inside a
 * worker process (shared with other sandboxes, or its own: see `isolation`). Blocks share variables
 * like notebook cells; `llm_query` and friends look synchronous to the model and reach the host
 * through `onHostCall`.
 *
 * @example
 * const sandbox = await Sandbox.create({ onHostCall: async (call) => `echo: ${JSON.stringify(call)}` });
 * await sandbox.setContext('a very long document ...');
 * const result = await sandbox.execute('const n = context.length; print(n)');
 * await sandbox.dispose();
 */
export class Sandbox<Scope = unknown> {
  readonly #replay: WorkerReplay;
  readonly #runner: BlockRunner<Scope>;
  /** Every call runs after the ones before it: blocks share one worker and one set of variables. */
  #queue: Promise<unknown> = Promise.resolve();
  #disposed = false;

  private constructor(options: SandboxOptions<Scope>) {
    const { onHostCall, onBlockWaiting, ...limits } = parseOptions(optionsSchema, options, 'Sandbox options');
    this.#runner = new BlockRunner<Scope>({ limits, onHostCall, onBlockWaiting, discardWorker: () => this.#replay.discard() });
    this.#replay = new WorkerReplay({
      limits,
      runSetup: (worker, code) => this.#runner.run(worker, code, { loadedContextMb: this.#replay.loadedContextMb }),
    });
  }

  static async create<Scope = unknown>(options: SandboxOptions<Scope> = {}): Promise<Sandbox<Scope>> {
    const sandbox = new Sandbox<Scope>(options);
    await sandbox.#exclusive(() => sandbox.#replay.live());
    return sandbox;
  }

  /**
   * Starts worker processes ahead of time so the next `create()` takes a few milliseconds instead
   * of the few hundred a cold start costs: a shared process, or with `isolation: 'process'`, `count`
   * spare processes. They never keep the process alive.
   */
  static prewarm(count = 1, options: { isolation?: Isolation } = {}): Promise<void> {
    const isolation = options.isolation ?? 'isolate';
    if (isolation === 'process') workerPool.reserve(count);
    return workerPool.warm(isolation);
  }

  /**
   * Makes `value` available to model code as a global (`context` by default). Strings stay strings;
   * arrays and objects arrive as parsed JSON. The value survives sandbox resets. Loading is bounded
   * by the block timeout; if it fails or `signal` aborts it, the sandbox is reset and the value is
   * not kept.
   */
  setContext(value: unknown, name = 'context', options: { signal?: AbortSignal } = {}): Promise<void> {
    if (!GLOBAL_NAME.test(name)) throw new ConfigurationError(`Invalid context name ${JSON.stringify(name)}: use a JavaScript identifier such as context_1`);
    if (value === undefined || typeof value === 'function' || typeof value === 'symbol' || typeof value === 'bigint') {
      throw new ConfigurationError(`A context must be a string or JSON-serializable value, got ${typeof value}`);
    }
    return this.#exclusive(async () => {
      options.signal?.throwIfAborted();
      await this.#replay.setContext(name, value, options.signal);
    });
  }

  /**
   * Makes host tools available to model code: `TOOLS` (their schemas) and `tools.NAME(args)`.
   * Calls arrive at `onHostCall` as `tool_call`; those named in `options.asyncTools` return
   * promises in the sandbox (see ToolOptions). Survives resets.
   */
  setTools(specs: { type: 'function'; function: { name: string } }[], options: ToolOptions = {}): Promise<void> {
    const asyncTools = options.asyncTools ?? [];
    const names = new Set(specs.map((spec) => spec.function.name));
    const unknown = asyncTools.filter((name) => !names.has(name));
    if (unknown.length > 0) {
      throw new ConfigurationError(`asyncTools names tools that are not among the specs: ${unknown.map((name) => JSON.stringify(name)).join(', ')}`);
    }
    return this.#exclusive(() => this.#replay.setTools({ specs: JSON.stringify(specs), asyncTools: [...asyncTools] }));
  }

  /**
   * Runs setup code (helpers, data, tool wrappers) before the model's first block, and again after
   * every reset, so what it defines is always there. Throws if the setup code fails.
   */
  addSetupCode(code: string): Promise<ExecuteResult> {
    return this.#exclusive(() => this.#replay.addSetupCode(code));
  }

  /**
   * The JSON Schema FINAL and FINAL_VAR values must match in blocks run with `checkFinal`, and the
   * refusal they throw otherwise (`{{problems}}` is replaced by the list); undefined clears it.
   * The worker process checks them, so hostile code that loops FINAL of a huge value spends its own
   * block time, never the host's.
   */
  setOutputSchema(outputSchema: BlockOutputSchema | undefined): Promise<void> {
    return this.#exclusive(() => this.#replay.setOutputSchema(outputSchema));
  }

  /**
   * Runs one block of model code. Never throws for errors in the code: they are in the result.
   * `scope` is handed to `onHostCall` with every call the block makes. With `checkFinal`, FINAL and
   * FINAL_VAR check their value against the output schema (see `setOutputSchema`) first: one that
   * does not match makes the FINAL call throw, listing the problems, and no answer is taken; the
   * refused values are in the result's `rejectedFinals`.
   */
  execute(code: string, options: { signal?: AbortSignal; scope?: Scope; checkFinal?: boolean } = {}): Promise<ExecuteResult> {
    return this.#exclusive(async () => {
      options.signal?.throwIfAborted();
      const worker = await this.#replay.live();
      const crash = this.#replay.takeCrash();
      if (crash) return this.#runner.crashedBetweenBlocks(crash);
      const { signal, scope, checkFinal } = options;
      return this.#runner.run(worker, code, { signal, scope, checkFinal, loadedContextMb: this.#replay.loadedContextMb });
    });
  }

  /** Process id of the worker process hosting this sandbox now (for monitoring); undefined between resets. */
  get processId(): number | undefined {
    return this.#replay.processId;
  }

  /** Ends the sandbox's isolate (with `isolation: 'process'`, its process) and resolves once it is gone. The sandbox cannot be used afterwards. */
  async dispose(): Promise<void> {
    this.#disposed = true;
    await this.#replay.stop();
  }

  #exclusive<T>(task: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(() => {
      if (this.#disposed) throw new SandboxError('sandbox_disposed', 'This sandbox was disposed; create a new one.');
      return task();
    });
    this.#queue = run.catch(() => {});
    return run;
  }
}
