import { DEFAULTS } from '../defaults.js';
import { describeError, SandboxError } from '../errors.js';
import { formatDuration } from '../format.js';
import type { ExecuteResult } from './block-result.js';
import { isFileContext } from './context-file.js';
import { isTimeoutText } from './isolate-errors.js';
import { writeContextFile } from './context-transfer.js';
import { workerPool } from './pool.js';
import type { SandboxLimits } from './sandbox-limits.js';
import type { IsolateHandle } from './isolate-handle.js';
import { WorkerExitError, type CommandWithoutId } from './worker-process.js';

interface WorkerReplayOptions {
  limits: SandboxLimits;
  /** Runs setup code in `worker` as a block, on first use and again in every fresh worker. */
  runSetup: (worker: IsolateHandle, code: string) => Promise<ExecuteResult>;
}

interface Tools {
  specs: string;
  asyncTools: string[];
}

/** The output schema FINAL values are checked against in the worker (see Sandbox.setOutputSchema). */
export interface BlockOutputSchema {
  schema: Record<string, unknown>;
  /** What a refused FINAL throws, with `{{problems}}` for the list of problems. */
  refusal: string;
}

/**
 * The sandbox's worker process and what every worker of it must hold: the limits, the contexts, the
 * tools and the setup code. A worker that died or was discarded is replaced on next use by a fresh
 * one, brought to the same state by replaying all of it.
 */
export class WorkerReplay {
  readonly #limits: SandboxLimits;
  readonly #runSetup: WorkerReplayOptions['runSetup'];
  #worker: IsolateHandle | undefined;
  /** The crash that took the previous isolate while no block ran (see takeCrash). */
  #crash: WorkerExitError | undefined;
  readonly #contexts = new Map<string, unknown>();
  readonly #setupBlocks: string[] = [];
  #tools: Tools | undefined;
  #outputSchema: BlockOutputSchema | undefined;
  #loadedContextMb = 0;

  constructor(options: WorkerReplayOptions) {
    this.#limits = options.limits;
    this.#runSetup = options.runSetup;
  }

  /** Process id of the current worker; undefined between resets. */
  get processId(): number | undefined {
    return this.#worker?.alive ? this.#worker.pid : undefined;
  }

  /** Contexts loaded into the current worker, in MB. */
  get loadedContextMb(): number {
    return this.#loadedContextMb;
  }

  /** The current worker, or a fresh one brought to the sandbox's state. */
  async live(): Promise<IsolateHandle> {
    if (this.#worker?.alive) return this.#worker;
    this.#crash ??= this.#worker?.crash;
    try {
      return await this.#start(workerPool.open(this.#limits.isolation));
    } catch (error) {
      // A spare can die while it waits (killed from outside) and look alive until its exit is
      // noticed: one that dies before taking any work is replaced once by a fresh process.
      if (!(error instanceof WorkerExitError)) throw startFailure(error);
      try {
        return await this.#start(workerPool.open(this.#limits.isolation));
      } catch (retryError) {
        throw startFailure(retryError);
      }
    }
  }

  /** Loads a context into the worker; once loaded, every later worker gets it too. */
  async setContext(name: string, value: unknown, signal: AbortSignal | undefined): Promise<void> {
    const worker = await this.live();
    await this.#loadContext(worker, name, value, signal);
    // Recorded once loaded, so a worker started later replays it, and a failed load is not replayed.
    this.#contexts.set(name, value);
  }

  async setTools(tools: Tools): Promise<void> {
    const worker = await this.live();
    this.#tools = tools;
    await this.#loadTools(worker);
  }

  /** Sets (or, with undefined, clears) the output schema; every later worker gets it too. */
  async setOutputSchema(outputSchema: BlockOutputSchema | undefined): Promise<void> {
    // A worker never had a schema unless one was set: clearing none costs no round trip.
    if (outputSchema === undefined && this.#outputSchema === undefined) return;
    const worker = await this.live();
    this.#outputSchema = outputSchema;
    await this.#loadOutputSchema(worker);
  }

  /** Runs setup code and keeps it for every later worker. Throws if it fails. */
  async addSetupCode(code: string): Promise<ExecuteResult> {
    const result = await this.#runSetup(await this.live(), code);
    if (result.error) throw new SandboxError('sandbox_setup_failed', `Setup code failed: ${result.error.stack || result.error.message}`);
    this.#setupBlocks.push(code);
    return result;
  }

  /**
   * The crash that ended the sandbox's previous isolate between blocks (its shared process went
   * down with another run), once: the next block must say its variables are gone.
   */
  takeCrash(): WorkerExitError | undefined {
    const crash = this.#crash;
    this.#crash = undefined;
    return crash;
  }

  /** Kills the current worker; the next use starts a fresh one. */
  discard(): void {
    this.#worker?.kill();
    this.#worker = undefined;
  }

  /** Stops the current worker and resolves once it has exited. */
  async stop(): Promise<void> {
    const worker = this.#worker;
    this.#worker = undefined;
    await worker?.stop();
  }

  async #start(worker: IsolateHandle): Promise<IsolateHandle> {
    this.#worker = worker;
    this.#loadedContextMb = 0;
    try {
      await worker.whenReady();
      const hostCallLimits = { maxChars: this.#limits.maxHostCallChars, maxBatchItems: DEFAULTS.sandbox.maxBatchItems, maxDepth: DEFAULTS.sandbox.maxHostCallDepth };
      await this.#command(worker, { type: 'init', memoryLimitMb: this.#limits.memoryLimitMb, hostCallLimits }, undefined);
      for (const [name, value] of this.#contexts) await this.#loadContext(worker, name, value, undefined);
      if (this.#tools) await this.#loadTools(worker);
      if (this.#outputSchema) await this.#loadOutputSchema(worker);
      for (const code of this.#setupBlocks) {
        const replay = await this.#runSetup(worker, code);
        if (replay.error) throw new SandboxError('sandbox_setup_failed', `setup code failed after a reset: ${replay.error.message}`);
      }
      return worker;
    } catch (error) {
      this.discard();
      throw error;
    }
  }

  #loadTools(worker: IsolateHandle): Promise<void> {
    return this.#command(worker, { type: 'setTools', ...this.#tools!, timeoutMs: this.#limits.blockTimeoutMs }, undefined);
  }

  #loadOutputSchema(worker: IsolateHandle): Promise<void> {
    const outputSchema = this.#outputSchema;
    const command = { type: 'setOutputSchema', schema: outputSchema ? JSON.stringify(outputSchema.schema) : null, refusal: outputSchema?.refusal ?? '' } as const;
    return this.#command(worker, command, undefined);
  }

  async #loadContext(worker: IsolateHandle, name: string, value: unknown, signal: AbortSignal | undefined): Promise<void> {
    const isText = typeof value === 'string';
    // A file context is read by the worker where it lies; anything else goes through a private temporary file.
    const file = isFileContext(value)
      ? { path: value.file, encoding: 'utf8' as const, bytes: value.bytes, remove: () => {} }
      : writeContextFile(isText ? value : JSON.stringify(value));
    try {
      const format = isText || isFileContext(value) ? 'text' : 'json';
      const command = { type: 'setGlobal', name, format, path: file.path, encoding: file.encoding, timeoutMs: this.#limits.blockTimeoutMs } as const;
      await this.#command(worker, command, signal);
      this.#loadedContextMb += file.bytes / 2 ** 20;
    } catch (error) {
      // A load that failed part-way may have left the isolate half-updated: start over from a clean one.
      this.discard();
      if (signal?.aborted && error === signal.reason) throw error;
      throw new SandboxError('sandbox_load_failed', `Loading ${name} into the sandbox failed: ${loadFailure(error, this.#limits.blockTimeoutMs)}`, { cause: error });
    } finally {
      file.remove();
    }
  }

  /**
   * Sends a command that runs code in the isolate. The isolate bounds that code with the timeout
   * the command carries; the host kills a worker that does not answer within that time plus a
   * grace period (one stuck where no timeout reaches), and one whose caller gave up.
   */
  async #command(worker: IsolateHandle, command: CommandWithoutId, signal: AbortSignal | undefined): Promise<void> {
    const limitMs = ('timeoutMs' in command ? command.timeoutMs : this.#limits.blockTimeoutMs) + DEFAULTS.sandbox.watchdogGraceMs;
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
}

function startFailure(error: unknown): SandboxError {
  return new SandboxError('sandbox_start_failed', `The sandbox could not start: ${describeError(error).message}`, { cause: error });
}

function loadFailure(error: unknown, blockTimeoutMs: number): string {
  const { message } = describeError(error);
  if (isTimeoutText(message) || error instanceof WorkerExitError) {
    return `it did not finish within the ${formatDuration(blockTimeoutMs)} block time limit. Raise the block timeout (--block-timeout) for very large JSON contexts.`;
  }
  return message;
}
