import { setMaxListeners } from 'node:events';
import { z } from 'zod';
import { DEFAULTS } from '../defaults.js';
import { SandboxError } from '../errors.js';
import { parseOptions } from '../options.js';
import { writeContextFile } from './context-transfer.js';
import { workerPool } from './pool.js';
import { blockReportSchema, hostCallSchema, type HostCall, type HostReply } from './protocol.js';
import { BlockSyntaxError, rewriteBlock } from './rewrite.js';
import { WorkerExitError, type WorkerProcess } from './worker-process.js';

/** Answers a call from model code. The returned value must be JSON-serializable. */
export type HostCallHandler = (call: HostCall, context: { signal: AbortSignal }) => unknown;

export interface SandboxOptions {
  /** Heap limit of the isolate in MB; the context counts against it. @default 1024 */
  memoryLimitMb?: number;
  /** Execution time one block may use, not counting time spent waiting for host calls. @default 60000 */
  blockTimeoutMs?: number;
  /** Characters one block may print before the rest is cut with a marker. @default 20000 */
  outputLimitChars?: number;
  /** Characters one host call may send; a larger one fails in the sandbox with a RangeError. @default 134217728 */
  maxHostCallChars?: number;
  /** Serves `llm_query`, `llm_query_batched`, `rlm_query`, `rlm_query_batched` and `tool_handler`. */
  onHostCall?: HostCallHandler;
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
  /** The model's variables after the block, with short type descriptions. */
  variables: Variable[];
  /** The block crashed the sandbox: it was replaced by a fresh one and every variable was lost. */
  reset: boolean;
}

/** The sandbox's limits; also validated by RLM, so a bad limit is reported before a run starts. */
export const sandboxLimitsSchema = z.object({
  memoryLimitMb: z.number().int().min(16).max(65_536).default(DEFAULTS.sandbox.memoryLimitMb),
  blockTimeoutMs: z.number().int().min(1).default(DEFAULTS.sandbox.blockTimeoutMs),
  outputLimitChars: z.number().int().min(100).default(DEFAULTS.sandbox.outputLimitChars),
  maxHostCallChars: z.number().int().min(1_000).default(DEFAULTS.sandbox.maxHostCallChars),
});

const optionsSchema = sandboxLimitsSchema.extend({
  onHostCall: z.custom<HostCallHandler>((value) => typeof value === 'function', 'expected a function').optional(),
});

const GLOBAL_NAME = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
// A batch of a million bad prompts has a million problems; the first few show what is wrong.
const REPORTED_PROBLEMS = 5;
const PROBLEM_CHARS = 200;

type ResetReason = 'memory' | 'crashed' | 'unresponsive';

/**
 * A persistent JavaScript REPL for model-written code, isolated in a V8 isolate inside its own
 * worker process. Blocks share variables like notebook cells; `llm_query` and friends look
 * synchronous to the model and reach the host through `onHostCall`.
 *
 * @example
 * const sandbox = await Sandbox.create({ onHostCall: async (call) => `echo: ${JSON.stringify(call)}` });
 * await sandbox.setContext('a very long document ...');
 * const result = await sandbox.execute('const n = context.length; print(n)');
 * await sandbox.dispose();
 */
export class Sandbox {
  private worker: WorkerProcess | undefined;
  private readonly globals = new Map<string, unknown>();
  private readonly setupBlocks: string[] = [];
  private toolSpecs: string | undefined;
  private lastVariables: Variable[] = [];
  private queue: Promise<unknown> = Promise.resolve();
  private disposed = false;

  private constructor(private readonly options: z.output<typeof optionsSchema>) {}

  static async create(options: SandboxOptions = {}): Promise<Sandbox> {
    const sandbox = new Sandbox(parseOptions(optionsSchema, options, 'Sandbox options'));
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
   * arrays and objects arrive as parsed JSON. The value survives sandbox resets.
   */
  setContext(value: unknown, name = 'context'): Promise<void> {
    if (!GLOBAL_NAME.test(name)) throw new TypeError(`Invalid context name ${JSON.stringify(name)}: use a JavaScript identifier such as context_1`);
    if (value === undefined || typeof value === 'function' || typeof value === 'symbol' || typeof value === 'bigint') {
      throw new TypeError(`A context must be a string or JSON-serializable value, got ${typeof value}`);
    }
    return this.exclusive(async () => {
      // Recorded after the worker is up, so a worker started here does not load it twice.
      const worker = await this.liveWorker();
      this.globals.set(name, value);
      await this.loadGlobal(worker, name, value);
    });
  }

  /**
   * Makes host tools available to model code: `TOOLS` (their schemas) and `tools.NAME(args)`.
   * Calls arrive at `onHostCall` as `tool_call`. Survives resets.
   */
  setTools(specs: { type: 'function'; function: { name: string } }[]): Promise<void> {
    return this.exclusive(async () => {
      const worker = await this.liveWorker();
      this.toolSpecs = JSON.stringify(specs);
      expectDone(await worker.request({ type: 'setTools', specs: this.toolSpecs }));
    });
  }

  /**
   * Runs setup code (helpers, data, tool wrappers) before the model's first block, and again after
   * every reset, so what it defines is always there. Throws if the setup code fails.
   */
  addSetupCode(code: string): Promise<ExecuteResult> {
    return this.exclusive(async () => {
      const result = await this.executeNow(code, undefined);
      if (result.error) throw new SandboxError('sandbox_setup_failed', `Setup code failed: ${result.error.stack || result.error.message}`);
      this.setupBlocks.push(code);
      return result;
    });
  }

  /** Runs one block of model code. Never throws for errors in the code: they are in the result. */
  execute(code: string, options: { signal?: AbortSignal } = {}): Promise<ExecuteResult> {
    return this.exclusive(() => this.executeNow(code, options.signal));
  }

  /** Process id of the worker running this sandbox now (for monitoring); undefined between resets. */
  get processId(): number | undefined {
    return this.worker?.alive ? this.worker.pid : undefined;
  }

  /** Stops the worker process. The sandbox cannot be used afterwards. */
  async dispose(): Promise<void> {
    this.disposed = true;
    this.discardWorker();
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
    const worker = workerPool.take();
    this.worker = worker;
    try {
      await worker.whenReady();
      const { memoryLimitMb, maxHostCallChars } = this.options;
      expectDone(await worker.request({ type: 'init', memoryLimitMb, maxHostCallChars }));
      for (const [name, value] of this.globals) await this.loadGlobal(worker, name, value);
      if (this.toolSpecs) expectDone(await worker.request({ type: 'setTools', specs: this.toolSpecs }));
      for (const code of this.setupBlocks) {
        const replay = await this.runOn(worker, code, undefined);
        if (replay.error) throw new Error(`setup code failed after a reset: ${replay.error.message}`);
      }
    } catch (error) {
      this.discardWorker();
      throw new SandboxError('sandbox_start_failed', `The sandbox could not start: ${(error as Error).message}`, { cause: error });
    }
    return worker;
  }

  private async loadGlobal(worker: WorkerProcess, name: string, value: unknown) {
    const isText = typeof value === 'string';
    const file = writeContextFile(isText ? value : JSON.stringify(value));
    try {
      const format = isText ? 'text' : 'json';
      expectDone(await worker.request({ type: 'setGlobal', name, format, path: file.path, encoding: file.encoding }));
    } finally {
      file.remove();
    }
  }

  private discardWorker() {
    this.worker?.kill();
    this.worker = undefined;
  }

  private async executeNow(code: string, signal: AbortSignal | undefined): Promise<ExecuteResult> {
    signal?.throwIfAborted();
    return this.runOn(await this.liveWorker(), code, signal);
  }

  private async runOn(worker: WorkerProcess, code: string, signal: AbortSignal | undefined): Promise<ExecuteResult> {
    const started = performance.now();
    const elapsed = () => performance.now() - started;

    let rewritten;
    try {
      rewritten = rewriteBlock(code);
    } catch (error) {
      if (!(error instanceof BlockSyntaxError)) throw error;
      const error_ = { name: 'SyntaxError', message: error.message, stack: `SyntaxError: ${error.message}\n${error.frame}` };
      return { stdout: '', error: error_, durationMs: elapsed(), variables: this.lastVariables, reset: false };
    }

    const block = new AbortController(); // ends host calls still running when the block is over
    setMaxListeners(0, block.signal); // every host call of a batch listens to it
    let hostWaitMs = 0;
    let hostCallStarted: number | undefined;
    worker.onHostCall = (id, request) => {
      hostCallStarted = performance.now();
      void this.serveHostCall(request, block.signal).then((reply) => {
        hostWaitMs += performance.now() - hostCallStarted!;
        hostCallStarted = undefined;
        worker.replyToHostCall(id, reply);
      });
    };

    // The isolate enforces the block timeout itself. The watchdog is for a worker that cannot:
    // one wedged in V8's fatal out-of-memory path, which only killing the process ends.
    let resetReason: ResetReason | undefined;
    const limitMs = this.options.blockTimeoutMs + DEFAULTS.sandbox.watchdogGraceMs;
    const watchdog = setInterval(() => {
      const waiting = hostWaitMs + (hostCallStarted === undefined ? 0 : performance.now() - hostCallStarted);
      if (elapsed() - waiting > limitMs) {
        resetReason = 'unresponsive';
        worker.kill();
      }
    }, Math.min(250, limitMs));

    let onAbort: (() => void) | undefined;
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(signal!.reason);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
    aborted.catch(() => {});

    try {
      const reply = await Promise.race([
        worker.request({
          type: 'execute',
          code: rewritten.code,
          hasResult: rewritten.hasResult,
          wrapperLine: rewritten.wrapperLine,
          columnShifts: rewritten.columnShifts,
          timeoutMs: this.options.blockTimeoutMs,
          outputLimit: this.options.outputLimitChars,
        }),
        aborted,
      ]);
      if (reply.type === 'failed') {
        if (reply.disposed) return this.resetResult('memory', elapsed());
        throw new SandboxError('sandbox_protocol_error', `The sandbox failed to run the block: ${reply.message}`);
      }
      if (reply.type !== 'executed') throw new SandboxError('sandbox_protocol_error', `Unexpected reply ${reply.type} to execute`);
      if (reply.outcome === 'memory') return this.resetResult('memory', elapsed());
      const parsed = blockReportSchema.safeParse(safeJsonParse(reply.result));
      if (!parsed.success) {
        this.discardWorker();
        throw new SandboxError('sandbox_protocol_error', 'The sandbox returned a malformed block report; it was reset.');
      }
      const report = parsed.data;
      let error: BlockError | undefined = report.error;
      if (reply.outcome === 'timeout') error = this.timeoutError();
      else if (reply.outcome === 'compile-error') error = splitFailure(reply.failure ?? 'SyntaxError: the block does not compile');
      else if (reply.outcome === 'unhandled-rejection' && !error) {
        error = splitFailure(`${reply.failure ?? 'Error'} (a promise was rejected and nothing handled it)`);
      }
      this.lastVariables = report.variables;
      return {
        stdout: report.droppedChars > 0 ? `${report.stdout}${truncationMarker(report.droppedChars)}` : report.stdout,
        ...(error && { error }),
        ...(report.final !== undefined && { final: report.final }),
        durationMs: elapsed(),
        variables: report.variables,
        reset: false,
      };
    } catch (error) {
      if (signal?.aborted && error === signal.reason) {
        this.discardWorker();
        throw error;
      }
      if (error instanceof WorkerExitError) return this.resetResult(resetReason ?? 'crashed', elapsed());
      throw error;
    } finally {
      clearInterval(watchdog);
      block.abort(new Error('the block has ended'));
      if (onAbort) signal?.removeEventListener('abort', onAbort);
      worker.onHostCall = undefined;
    }
  }

  private async serveHostCall(request: string, signal: AbortSignal): Promise<string> {
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
      return replyJson({ ok: true, value: await handler(call, { signal }) });
    } catch (error) {
      const { name, message } = error instanceof Error ? error : { name: 'Error', message: String(error) };
      return replyJson({ ok: false, error: { name, message } });
    }
  }

  private resetResult(reason: ResetReason, durationMs: number): ExecuteResult {
    this.discardWorker();
    this.lastVariables = [];
    const lost = 'The sandbox was reset: every variable was lost (context is still loaded). Rebuild the state you need in smaller steps.';
    const errors: Record<ResetReason, BlockError> = {
      memory: {
        name: 'MemoryLimitError',
        message: `The block used more than the sandbox memory limit (${this.options.memoryLimitMb} MB). ${lost}`,
        stack: '',
      },
      crashed: {
        name: 'SandboxCrashedError',
        message: `The sandbox process stopped while running the block (usually memory exhaustion). ${lost}`,
        stack: '',
      },
      unresponsive: {
        name: 'TimeoutError',
        message: `The block ran past the ${formatSeconds(this.options.blockTimeoutMs)} time limit and could not be interrupted. ${lost}`,
        stack: '',
      },
    };
    const error = errors[reason];
    error.stack = `${error.name}: ${error.message}`;
    return { stdout: '', error, durationMs, variables: [], reset: true };
  }

  private timeoutError(): BlockError {
    const message =
      `The block ran for more than ${formatSeconds(this.options.blockTimeoutMs)} of execution time and was stopped ` +
      '(time spent waiting for llm_query and tools does not count). Variables set before the stop are kept. ' +
      'Split the work into smaller blocks.';
    return { name: 'TimeoutError', message, stack: `TimeoutError: ${message}` };
  }
}

function expectDone(reply: { type: string; message?: string }) {
  if (reply.type !== 'done') throw new Error(reply.message ?? `unexpected reply ${reply.type}`);
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
  const problems = issues.slice(0, REPORTED_PROBLEMS).map((issue) => clip(`${issue.path.join('.') || 'arguments'}: ${issue.message}`));
  const unreported = issues.length - problems.length;
  if (unreported > 0) problems.push(`and ${unreported.toLocaleString('en-US')} more problem${unreported === 1 ? '' : 's'}`);
  return problems.join('; ');
}

function clip(text: string): string {
  return text.length > PROBLEM_CHARS ? `${text.slice(0, PROBLEM_CHARS - 3)}...` : text;
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
  const name = match?.[1] ?? 'Error';
  const message = match?.[2] ?? failure;
  return { name, message, stack: `${name}: ${message}` };
}

function truncationMarker(droppedChars: number): string {
  return `\n... [output truncated: ${droppedChars.toLocaleString('en-US')} more characters not shown. Print less: slices, counts or summaries.]`;
}

function formatSeconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${(ms / 1000).toFixed(1)} s`;
}
