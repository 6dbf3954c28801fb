import { setMaxListeners } from 'node:events';
import { z } from 'zod';
import { DEFAULTS } from '../defaults.js';
import { untilAborted } from '../abort.js';
import { ConfigurationError, describeError, SandboxError } from '../errors.js';
import { formatDuration } from '../format.js';
import { parseOptions } from '../options.js';
import { isFileContext } from './context-file.js';
import { writeContextFile } from './context-transfer.js';
import { workerPool } from './pool.js';
import { blockReportSchema, hostCallSchema, type BlockReport, type HostCall, type HostReply, type WorkerCommand } from './protocol.js';
import { BlockSyntaxError, rewriteBlock } from './rewrite.js';
import { REPORT_LIMITS, type HostCallLimits } from './shared.js';
import { readResidentMemoryMb } from './resident-memory.js';
import { WorkerExitError, type HostCallMode, type WorkerProcess } from './worker-process.js';

/**
 * Answers a call from model code. The returned value must be JSON-serializable. `signal` aborts
 * when the block that made the call ends; `scope` is what the caller passed to `execute` for that
 * block (undefined for setup code and internal blocks).
 */
export type HostCallHandler<Scope = unknown> = (call: HostCall, context: { signal: AbortSignal; scope: Scope | undefined }) => unknown;

/**
 * Told that a block cannot go on until one of its asynchronous tool calls (see `setTools`) is
 * answered: `pendingCalls` of them are out, and the block sends nothing more until then. `scope` is
 * what the caller passed to `execute` for that block. Called while the sandbox reads the worker's
 * messages: return quickly, and do not throw.
 */
export type BlockWaitingHandler<Scope = unknown> = (context: { scope: Scope | undefined; pendingCalls: number }) => void;

export interface ToolOptions {
  /**
   * Tools answered asynchronously: in the sandbox, `tools.NAME(args)` returns a promise of the
   * result and `tool_handler(NAME, args)` a promise of its text, so a block can have many calls
   * out at once (`await Promise.all(...)`). They reach `onHostCall` as ordinary `tool_call`s.
   */
  asyncTools?: string[];
}

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
   * Resident memory of the worker process, in MB, past which it is reset. A backstop for memory the
   * isolate's heap limit does not see. @default twice the heap limit plus twice the loaded contexts plus 512
   */
  rssLimitMb?: number;
  /** Serves `llm_query`, `llm_query_batched`, `rlm_query`, `rlm_query_batched` and `tool_handler`. */
  onHostCall?: HostCallHandler<Scope>;
  /** Called each time a block waits for its asynchronous tool calls (see `setTools`). */
  onBlockWaiting?: BlockWaitingHandler<Scope>;
}

export interface BlockError {
  name: string;
  message: string;
  /** Name, message and the frames in model code (`at f (block:3:7)`); never host frames or paths. */
  stack: string;
}

export interface Variable {
  name: string;
  type: string;
}

export interface ExecuteResult {
  /** Everything printed, in order, cut at the output limit with a marker saying how much was dropped. */
  stdout: string;
  error?: BlockError;
  /** Set when the block called FINAL or FINAL_VAR: the serialized answer. */
  final?: string;
  durationMs: number;
  /** The model's variables after the block, with short type descriptions (at most 100, sorted by name). */
  variables: Variable[];
  /** How many more variables exist than `variables` lists. */
  omittedVariables?: number;
  /** The block crashed the sandbox: it was replaced by a fresh one and every variable was lost. */
  reset: boolean;
}

/** The sandbox's limits; also validated by RLM, so a bad limit is reported before a run starts. */
export const sandboxLimitsSchema = z.object({
  memoryLimitMb: z.number().int().min(16).max(65_536).default(DEFAULTS.sandbox.memoryLimitMb),
  blockTimeoutMs: z.number().int().min(1).default(DEFAULTS.sandbox.blockTimeoutMs),
  outputLimitChars: z.number().int().min(100).default(DEFAULTS.sandbox.outputLimitChars),
  maxHostCallChars: z.number().int().min(1_000).default(DEFAULTS.sandbox.maxHostCallChars),
  rssLimitMb: z.number().int().min(64).optional(),
});

const optionsSchema = sandboxLimitsSchema.extend({
  onHostCall: z.custom<HostCallHandler>((value) => typeof value === 'function', 'expected a function').optional(),
  onBlockWaiting: z.custom<BlockWaitingHandler>((value) => typeof value === 'function', 'expected a function').optional(),
});

const GLOBAL_NAME = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
// A batch of a million bad prompts has a million problems; the first few show what is wrong.
const REPORTED_PROBLEMS = 5;
const PROBLEM_CHARS = 200;

type ResetReason = 'memory' | 'memory-full' | 'crashed' | 'unresponsive' | 'resident-memory' | 'report-timeout' | 'report-failed';

/**
 * A persistent JavaScript REPL for model-written code, isolated in a V8 isolate inside its own
 * worker process. Blocks share variables like notebook cells; `llm_query` and friends look
 * synchronous to the model and reach the host through `onHostCall`. `Scope` is the type of what
 * the caller hands to `execute` for each block and gets back in `onHostCall` and `onBlockWaiting`.
 *
 * @example
 * const sandbox = await Sandbox.create({ onHostCall: async (call) => `echo: ${JSON.stringify(call)}` });
 * await sandbox.setContext('a very long document ...');
 * const result = await sandbox.execute('const n = context.length; print(n)');
 * await sandbox.dispose();
 */
export class Sandbox<Scope = unknown> {
  private worker: WorkerProcess | undefined;
  private readonly globals = new Map<string, unknown>();
  private readonly setupBlocks: string[] = [];
  private tools: { specs: string; asyncTools: string[] } | undefined;
  private lastVariables: Variable[] = [];
  private loadedContextMb = 0;
  private queue: Promise<unknown> = Promise.resolve();
  private disposed = false;

  private constructor(private readonly options: z.output<typeof optionsSchema>) {}

  static async create<Scope = unknown>(options: SandboxOptions<Scope> = {}): Promise<Sandbox<Scope>> {
    const sandbox = new Sandbox<Scope>(parseOptions(optionsSchema, options, 'Sandbox options'));
    await sandbox.exclusive(() => sandbox.liveWorker());
    return sandbox;
  }

  /**
   * Starts a spare worker process ahead of time so the next `create()` takes a few milliseconds
   * instead of the few hundred a cold start costs. Spares never keep the process alive.
   */
  static prewarm(count = 1): Promise<void> {
    workerPool.reserve(count);
    return workerPool.warm();
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
    return this.exclusive(async () => {
      options.signal?.throwIfAborted();
      const worker = await this.liveWorker();
      await this.loadGlobal(worker, name, value, options.signal);
      // Recorded once loaded, so a worker started later replays it, and a failed load is not replayed.
      this.globals.set(name, value);
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
    return this.exclusive(async () => {
      const worker = await this.liveWorker();
      this.tools = { specs: JSON.stringify(specs), asyncTools: [...asyncTools] };
      await this.loadTools(worker);
    });
  }

  /**
   * Runs setup code (helpers, data, tool wrappers) before the model's first block, and again after
   * every reset, so what it defines is always there. Throws if the setup code fails.
   */
  addSetupCode(code: string): Promise<ExecuteResult> {
    return this.exclusive(async () => {
      const result = await this.runInWorker(await this.liveWorker(), code, undefined);
      if (result.error) throw new SandboxError('sandbox_setup_failed', `Setup code failed: ${result.error.stack || result.error.message}`);
      this.setupBlocks.push(code);
      return result;
    });
  }

  /**
   * Runs one block of model code. Never throws for errors in the code: they are in the result.
   * `scope` is handed to `onHostCall` with every call the block makes.
   */
  execute(code: string, options: { signal?: AbortSignal; scope?: Scope } = {}): Promise<ExecuteResult> {
    return this.exclusive(async () => {
      options.signal?.throwIfAborted();
      return this.runInWorker(await this.liveWorker(), code, options.signal, options.scope);
    });
  }

  /** Process id of the worker running this sandbox now (for monitoring); undefined between resets. */
  get processId(): number | undefined {
    return this.worker?.alive ? this.worker.pid : undefined;
  }

  /** Stops the worker process and resolves once it has exited. The sandbox cannot be used afterwards. */
  async dispose(): Promise<void> {
    this.disposed = true;
    const worker = this.worker;
    this.worker = undefined;
    await worker?.stop();
  }

  // ---- internals ---------------------------------------------------------------------------------

  private exclusive<T>(task: () => Promise<T>): Promise<T> {
    const run = this.queue.then(() => {
      if (this.disposed) throw new SandboxError('sandbox_disposed', 'This sandbox was disposed; create a new one.');
      return task();
    });
    this.queue = run.catch(() => {});
    return run;
  }

  private async liveWorker(): Promise<WorkerProcess> {
    if (this.worker?.alive) return this.worker;
    try {
      return await this.startWorker(workerPool.take());
    } catch (error) {
      // A spare can die while it waits (killed from outside) and look alive until its exit is
      // noticed: one that dies before taking any work is replaced once by a fresh process.
      if (!(error instanceof WorkerExitError)) throw this.startFailure(error);
      try {
        return await this.startWorker(workerPool.take());
      } catch (retryError) {
        throw this.startFailure(retryError);
      }
    }
  }

  /** Brings a new worker to this sandbox's state: limits, contexts, tools and setup code. */
  private async startWorker(worker: WorkerProcess): Promise<WorkerProcess> {
    this.worker = worker;
    this.loadedContextMb = 0;
    try {
      await worker.whenReady();
      await this.command(worker, { type: 'init', memoryLimitMb: this.options.memoryLimitMb, hostCallLimits: this.hostCallLimits() }, undefined);
      for (const [name, value] of this.globals) await this.loadGlobal(worker, name, value, undefined);
      if (this.tools) await this.loadTools(worker);
      for (const code of this.setupBlocks) {
        const replay = await this.runInWorker(worker, code, undefined);
        if (replay.error) throw new SandboxError('sandbox_setup_failed', `setup code failed after a reset: ${replay.error.message}`);
      }
      return worker;
    } catch (error) {
      this.discardWorker();
      throw error;
    }
  }

  private startFailure(error: unknown): SandboxError {
    return new SandboxError('sandbox_start_failed', `The sandbox could not start: ${(error as Error).message}`, { cause: error });
  }

  private hostCallLimits(): HostCallLimits {
    return { maxChars: this.options.maxHostCallChars, maxBatchItems: DEFAULTS.sandbox.maxBatchItems, maxDepth: DEFAULTS.sandbox.maxHostCallDepth };
  }

  private loadTools(worker: WorkerProcess): Promise<void> {
    return this.command(worker, { type: 'setTools', ...this.tools!, timeoutMs: this.options.blockTimeoutMs }, undefined);
  }

  private async loadGlobal(worker: WorkerProcess, name: string, value: unknown, signal: AbortSignal | undefined) {
    const isText = typeof value === 'string';
    // A file context is read by the worker where it lies; anything else goes through a private temporary file.
    const file = isFileContext(value)
      ? { path: value.file, encoding: 'utf8' as const, bytes: value.bytes, remove: () => {} }
      : writeContextFile(isText ? value : JSON.stringify(value));
    try {
      const format = isText || isFileContext(value) ? 'text' : 'json';
      const command = { type: 'setGlobal', name, format, path: file.path, encoding: file.encoding, timeoutMs: this.options.blockTimeoutMs } as const;
      await this.command(worker, command, signal);
      this.loadedContextMb += file.bytes / 2 ** 20;
    } catch (error) {
      // A load that failed part-way may have left the isolate half-updated: start over from a clean one.
      this.discardWorker();
      if (signal?.aborted && error === signal.reason) throw error;
      throw new SandboxError('sandbox_load_failed', `Loading ${name} into the sandbox failed: ${loadFailure(error, this.options.blockTimeoutMs)}`, { cause: error });
    } finally {
      file.remove();
    }
  }

  /**
   * Sends a command that runs code in the isolate. The isolate bounds that code with the timeout
   * the command carries; the host kills a worker that does not answer within that time plus a
   * grace period (one stuck where no timeout reaches), and one whose caller gave up.
   */
  private async command(worker: WorkerProcess, command: DistributiveOmit<WorkerCommand, 'id'>, signal: AbortSignal | undefined): Promise<void> {
    const limitMs = ('timeoutMs' in command ? command.timeoutMs : this.options.blockTimeoutMs) + DEFAULTS.sandbox.watchdogGraceMs;
    const watchdog = setTimeout(() => worker.kill(), limitMs);
    const onAbort = () => worker.kill();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const reply = await worker.request(command);
      if (reply.type !== 'done') throw new SandboxError('sandbox_protocol_error', reply.type === 'failed' ? reply.message : `unexpected reply ${reply.type}`);
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      throw error;
    } finally {
      clearTimeout(watchdog);
      signal?.removeEventListener('abort', onAbort);
    }
  }

  private discardWorker() {
    this.worker?.kill();
    this.worker = undefined;
  }

  private async runInWorker(worker: WorkerProcess, code: string, signal: AbortSignal | undefined, scope?: unknown): Promise<ExecuteResult> {
    const started = performance.now();
    const elapsed = () => performance.now() - started;

    let rewritten;
    try {
      rewritten = rewriteBlock(code);
    } catch (error) {
      if (!(error instanceof BlockSyntaxError)) throw error;
      const syntaxError = { name: 'SyntaxError', message: error.message, stack: `SyntaxError: ${error.message}\n${error.frame}` };
      return { stdout: '', error: syntaxError, durationMs: elapsed(), variables: this.lastVariables, reset: false };
    }

    const bridge = new HostCallBridge(
      worker,
      (request, blockSignal) => this.serveHostCall(request, blockSignal, scope),
      (pendingCalls) => this.options.onBlockWaiting?.({ scope, pendingCalls }),
    );
    const watchdog = new BlockWatchdog(worker, {
      timeLimitMs: this.options.blockTimeoutMs + DEFAULTS.sandbox.reportAllowanceMs + DEFAULTS.sandbox.watchdogGraceMs,
      rssLimitMb: this.options.rssLimitMb ?? 2 * this.options.memoryLimitMb + 2 * this.loadedContextMb + 512,
      hostWaitMs: () => bridge.waitedMs(),
    });
    try {
      const reply = await untilAborted(
        worker.request({
          type: 'execute',
          code: rewritten.code,
          hasResult: rewritten.hasResult,
          wrapperLine: rewritten.wrapperLine,
          columnShifts: rewritten.columnShifts,
          timeoutMs: this.options.blockTimeoutMs,
          outputLimit: this.options.outputLimitChars,
        }),
        signal,
      );
      if (reply.type === 'failed') {
        if (reply.disposed) return this.resetResult('memory', elapsed());
        throw new SandboxError('sandbox_protocol_error', `The sandbox failed to run the block: ${reply.message}`);
      }
      if (reply.type !== 'executed') throw new SandboxError('sandbox_protocol_error', `Unexpected reply ${reply.type} to execute`);
      if (reply.outcome === 'memory') return this.resetResult('memory', elapsed());
      if (reply.outcome === 'memory-full') return this.heapFullResult(reply, elapsed());
      if (reply.outcome === 'report-timeout' || reply.outcome === 'report-failed') return this.reportFailedResult(reply, reply.outcome, elapsed());
      return this.blockResult(reply, elapsed());
    } catch (error) {
      if (signal?.aborted && error === signal.reason) {
        this.discardWorker();
        throw error;
      }
      if (error instanceof WorkerExitError) return this.resetResult(watchdog.verdict ?? 'crashed', elapsed());
      throw error;
    } finally {
      watchdog.stop();
      bridge.close();
    }
  }

  /** Turns the worker's reply to a completed block into the result model code's author sees. */
  private blockResult(reply: Extract<Reply, { type: 'executed' }>, durationMs: number): ExecuteResult {
    const parsed = blockReportSchema.safeParse(safeJsonParse(reply.result));
    if (!parsed.success) {
      this.discardWorker();
      throw new SandboxError('sandbox_protocol_error', 'The sandbox returned a malformed block report; it was reset.');
    }
    const report = boundReport(parsed.data, this.options.outputLimitChars);
    let error: BlockError | undefined = report.error;
    if (reply.outcome === 'timeout') error = this.timeoutError();
    else if (reply.outcome === 'compile-error') error = splitFailure(reply.failure ?? 'SyntaxError: the block does not compile');
    else if (reply.outcome === 'unhandled-rejection' && !error) {
      error = splitFailure(`${reply.failure ?? 'Error'} (a promise was rejected and nothing handled it)`);
    }
    this.lastVariables = report.variables;
    const stdout = report.droppedChars > 0 ? `${report.stdout}${truncationMarker(report.droppedChars)}` : report.stdout;
    return {
      stdout: report.note === undefined ? stdout : `${stdout}${stdout === '' || stdout.endsWith('\n') ? '' : '\n'}${report.note}\n`,
      ...(error && { error }),
      ...(report.final !== undefined && { final: report.final }),
      durationMs,
      variables: report.variables,
      ...(report.omittedVariables > 0 && { omittedVariables: report.omittedVariables }),
      reset: false,
    };
  }

  private async serveHostCall(request: string, signal: AbortSignal, scope: unknown): Promise<string> {
    const value = safeJsonParse(request);
    const parsed = hostCallSchema.safeParse(value);
    if (!parsed.success) {
      const kind = readKind(value);
      return replyJson({ ok: false, error: { name: 'TypeError', message: `${kind}: invalid arguments (${describeProblems(parsed.error.issues)})` } });
    }
    const call = parsed.data;
    const handler = this.options.onHostCall;
    if (!handler) {
      return replyJson({ ok: false, error: { name: 'Error', message: `${callName(call)} is not available in this sandbox` } });
    }
    try {
      return replyJson({ ok: true, value: await untilAborted(Promise.resolve(handler(call, { signal, scope })), signal) });
    } catch (error) {
      return replyJson({ ok: false, error: describeError(error) });
    }
  }

  /** The block's own report, then a reset blamed on it: it left the heap too full for the next block. */
  private heapFullResult(reply: Extract<Reply, { type: 'executed' }>, durationMs: number): ExecuteResult {
    const { stdout } = this.blockResult({ ...reply, outcome: 'completed' }, durationMs);
    return { ...this.resetResult('memory-full', durationMs, reply.failure), stdout };
  }

  /**
   * The block's output, then a reset: what it left behind (a global getter or Proxy trap that never
   * returns) made its report fail, and would make every later block's report fail the same way.
   */
  private reportFailedResult(reply: Extract<Reply, { type: 'executed' }>, reason: 'report-timeout' | 'report-failed', durationMs: number): ExecuteResult {
    const { stdout, final } = this.blockResult({ ...reply, outcome: 'completed' }, durationMs);
    const reset = this.resetResult(reason, durationMs, reply.failure);
    return { ...reset, stdout, ...(final !== undefined && { final }) };
  }

  private resetResult(reason: ResetReason, durationMs: number, detail = ''): ExecuteResult {
    this.discardWorker();
    this.lastVariables = [];
    const lost = 'The sandbox was reset: every variable was lost (context is still loaded). Rebuild the state you need in smaller steps.';
    const messages: Record<ResetReason, [string, string]> = {
      memory: ['MemoryLimitError', `The block used more than the sandbox memory limit (${this.options.memoryLimitMb} MB). ${lost}`],
      'memory-full': [
        'MemoryLimitError',
        `The block left the sandbox's memory nearly full (${detail} still in use after it ended), so the next block would fail. Keep less in variables. ${lost}`,
      ],
      'resident-memory': ['MemoryLimitError', `The sandbox process grew far past its memory limit (${this.options.memoryLimitMb} MB heap). ${lost}`],
      crashed: ['SandboxCrashedError', `The sandbox process stopped while running the block (usually memory exhaustion). ${lost}`],
      unresponsive: ['TimeoutError', `The block ran past the ${formatDuration(this.options.blockTimeoutMs)} time limit and could not be interrupted. ${lost}`],
      'report-timeout': [
        'TimeoutError',
        `The block ran past the ${formatDuration(this.options.blockTimeoutMs)} time limit while its variables were listed: ` +
          `a getter or Proxy it left in a global variable (or in its error or value) does not return. ${lost}`,
      ],
      'report-failed': ['SandboxError', `The block's variables could not be listed (${detail}). ${lost}`],
    };
    const [name, message] = messages[reason];
    return { stdout: '', error: { name, message, stack: `${name}: ${message}` }, durationMs, variables: [], reset: true };
  }

  private timeoutError(): BlockError {
    const message =
      `The block ran for more than ${formatDuration(this.options.blockTimeoutMs)} of execution time and was stopped ` +
      '(time spent waiting for llm_query and tools does not count). Variables set before the stop are kept. ' +
      'Split the work into smaller blocks.';
    return { name: 'TimeoutError', message, stack: `TimeoutError: ${message}` };
  }
}

type Reply = Awaited<ReturnType<WorkerProcess['request']>>;
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/**
 * Serves the host calls of one block and keeps count of the time the block spends waiting for
 * them, which does not count against its time limit: while a synchronous call is out, or after the
 * block said it waits for its asynchronous calls and until one of them is answered. That is wall
 * time, counted once however many calls are out; asynchronous calls out while the block computes
 * are not waiting. Calls still running when the block ends are aborted, and their answers dropped.
 */
class HostCallBridge {
  private readonly block = new AbortController();
  /** Asynchronous calls not answered yet. */
  private readonly unanswered = new Set<number>();
  private syncCallOut = false;
  private blockWaiting = false;
  private waitedTotalMs = 0;
  private waitingSince: number | undefined;

  constructor(
    private readonly worker: WorkerProcess,
    serve: (request: string, signal: AbortSignal) => Promise<string>,
    onBlockWaiting: (pendingCalls: number) => void,
  ) {
    setMaxListeners(0, this.block.signal); // every host call of a batch listens to it
    worker.onHostCall = (id, request, mode) => {
      if (mode === 'sync') this.syncCallOut = true;
      else this.unanswered.add(id);
      this.updateClock();
      void serve(request, this.block.signal).then((reply) => this.answer(id, mode, reply));
    };
    worker.onWaiting = (calls) => {
      // The notice crossed an answer on its way: the block goes on as soon as it reads that one.
      if (!calls.every((id) => this.unanswered.has(id))) return;
      this.blockWaiting = true;
      this.updateClock();
      try {
        onBlockWaiting(calls.length);
      } catch (error) {
        // An embedder's handler must not take the host down: the calls the block waits for fail instead.
        const failure = replyJson({ ok: false, error: describeError(error) });
        for (const id of [...this.unanswered]) this.answer(id, 'async', failure);
      }
    };
  }

  waitedMs(): number {
    return this.waitedTotalMs + (this.waitingSince === undefined ? 0 : performance.now() - this.waitingSince);
  }

  close(): void {
    this.block.abort(new Error('the block has ended'));
    this.worker.onHostCall = undefined;
    this.worker.onWaiting = undefined;
  }

  private answer(id: number, mode: HostCallMode, reply: string): void {
    if (this.block.signal.aborted) return;
    if (mode === 'sync') this.syncCallOut = false;
    else {
      // A waiting block waits for every call it has out, so any answer lets it go on.
      this.unanswered.delete(id);
      this.blockWaiting = false;
    }
    this.updateClock();
    this.worker.replyToHostCall(id, reply);
  }

  private updateClock(): void {
    const waiting = this.syncCallOut || this.blockWaiting;
    if (waiting && this.waitingSince === undefined) this.waitingSince = performance.now();
    if (!waiting && this.waitingSince !== undefined) {
      this.waitedTotalMs += performance.now() - this.waitingSince;
      this.waitingSince = undefined;
    }
  }
}

/**
 * The isolate enforces the block timeout and heap limit itself. The watchdog is for a worker that
 * cannot: one wedged in V8's fatal out-of-memory path (only killing the process ends it), or one
 * whose memory grows where the heap limit does not look. It kills such a worker and records why.
 */
class BlockWatchdog {
  verdict: ResetReason | undefined;
  private readonly started = performance.now();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly worker: WorkerProcess,
    private readonly limits: { timeLimitMs: number; rssLimitMb: number; hostWaitMs: () => number },
  ) {
    this.timer = setInterval(() => this.check(), Math.min(DEFAULTS.sandbox.watchdogIntervalMs, limits.timeLimitMs));
  }

  private check(): void {
    if (performance.now() - this.started - this.limits.hostWaitMs() > this.limits.timeLimitMs) this.kill('unresponsive');
    const rssMb = this.worker.pid === undefined ? undefined : readResidentMemoryMb(this.worker.pid);
    if (rssMb !== undefined && rssMb > this.limits.rssLimitMb) this.kill('resident-memory');
  }

  private kill(reason: ResetReason): void {
    this.verdict ??= reason;
    this.worker.kill();
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

/**
 * The report comes out of the isolate, so it is treated as untrusted even though the prelude
 * bounds it already: nothing in it may grow the root model's next prompt past these limits.
 */
function boundReport(report: BlockReport, outputLimitChars: number): BlockReport {
  const stdout = report.stdout.length > outputLimitChars ? report.stdout.slice(0, outputLimitChars) : report.stdout;
  const error = report.error && {
    name: clip(report.error.name, REPORT_LIMITS.errorNameChars),
    message: clip(report.error.message, REPORT_LIMITS.errorMessageChars),
    stack: clip(report.error.stack, REPORT_LIMITS.errorMessageChars + REPORT_LIMITS.stackFrames * REPORT_LIMITS.stackLineChars),
  };
  const variables = report.variables.slice(0, REPORT_LIMITS.variables).map((variable) => ({
    name: clip(variable.name, REPORT_LIMITS.variableNameChars),
    type: clip(variable.type, REPORT_LIMITS.variableTypeChars),
  }));
  return {
    ...report,
    stdout,
    droppedChars: report.droppedChars + (report.stdout.length - stdout.length),
    ...(error && { error }),
    ...(report.note !== undefined && { note: clip(report.note, REPORT_LIMITS.errorMessageChars) }),
    variables,
    omittedVariables: report.omittedVariables + (report.variables.length - variables.length),
  };
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}... (${text.length - max} more chars)`;
}

function loadFailure(error: unknown, blockTimeoutMs: number): string {
  const { message } = describeError(error);
  if (/timed out/i.test(message) || error instanceof WorkerExitError) {
    return `it did not finish within the ${formatDuration(blockTimeoutMs)} block time limit. Raise the block timeout (--block-timeout) for very large JSON contexts.`;
  }
  return message;
}

function safeJsonParse(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function readKind(request: unknown): string {
  const kind = (request as { kind?: unknown } | undefined)?.kind;
  return typeof kind === 'string' ? kind : 'host call';
}

function describeProblems(issues: z.ZodError['issues']): string {
  const problems = issues.slice(0, REPORTED_PROBLEMS).map((issue) => clip(`${issue.path.join('.') || 'arguments'}: ${issue.message}`, PROBLEM_CHARS));
  const unreported = issues.length - problems.length;
  if (unreported > 0) problems.push(`and ${unreported.toLocaleString('en-US')} more problem${unreported === 1 ? '' : 's'}`);
  return problems.join('; ');
}

function callName(call: HostCall): string {
  return call.kind === 'tool_call' ? 'tool_handler' : call.kind;
}

function replyJson(reply: HostReply): string {
  try {
    return JSON.stringify(reply);
  } catch (error) {
    return JSON.stringify({ ok: false, error: { name: 'TypeError', message: `the host's answer cannot be sent to the sandbox: ${(error as Error).message}` } });
  }
}

function splitFailure(failure: string): BlockError {
  const match = /^([A-Za-z]*Error): ([\s\S]*)$/.exec(failure);
  const name = clip(match?.[1] ?? 'Error', REPORT_LIMITS.errorNameChars);
  const message = clip(match?.[2] ?? failure, REPORT_LIMITS.errorMessageChars);
  return { name, message, stack: `${name}: ${message}` };
}

function truncationMarker(droppedChars: number): string {
  return `\n... [output truncated: ${droppedChars.toLocaleString('en-US')} more characters not shown. Print less: slices, counts or summaries.]`;
}

