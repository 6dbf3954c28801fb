import { DEFAULTS } from '../defaults.js';
import { WorkerExitError, type CommandWithoutId, type HostedRun, type Reply, type WorkerProcess } from './worker-process.js';

/** `async`: model code awaits the call and may make more meanwhile (see the `waiting` event). */
export type HostCallMode = 'sync' | 'async';

/** The isolate was ended by the host (a watchdog, a caller that gave up): its pending work fails with this. */
class IsolateEndedError extends WorkerExitError {
  override name = 'IsolateEndedError';
  constructor() {
    super(null, null, '');
    this.message = 'The sandbox isolate was ended by the host.';
  }
}

interface IsolateHandleOptions {
  /** `process` isolation: the process is this isolate's alone, and ends with it. */
  ownsProcess: boolean;
  /** Told once the isolate is gone, so the pool can retire an emptied process. */
  onClose: () => void;
}

let nextSandboxId = 1;

/**
 * The host's handle on one sandbox's isolate inside a worker process (shared with other runs, or
 * its own with `isolation: 'process'`): its commands, its host calls, and its end. Ending it never
 * touches the other runs of its process, unless the process does not answer; then the process is
 * killed, and those runs fail with the cause.
 */
export class IsolateHandle implements HostedRun {
  /** Called for every host call model code makes; answer with `replyToHostCall`. */
  onHostCall: ((id: number, request: string, mode: HostCallMode) => void) | undefined;
  /** Called when the running block cannot go on until one of these async calls is answered. */
  onWaiting: ((calls: number[]) => void) | undefined;

  readonly #process: WorkerProcess;
  readonly #sandbox = nextSandboxId++;
  readonly #options: IsolateHandleOptions;
  /** Why the isolate is gone: its process stopped, or the host ended it. */
  #lost: WorkerExitError | undefined;
  #closed = false;
  readonly #inFlight = new Set<(error: Error) => void>();

  constructor(workerProcess: WorkerProcess, options: IsolateHandleOptions) {
    this.#process = workerProcess;
    this.#options = options;
    workerProcess.addRun(this.#sandbox, this);
  }

  whenReady(): Promise<void> {
    return this.#process.whenReady();
  }

  /** Process id of the worker process hosting the isolate. */
  get pid(): number | undefined {
    return this.#process.pid;
  }

  get alive(): boolean {
    return this.#lost === undefined && this.#process.alive;
  }

  /** Why the isolate went away without the sandbox ending it (its process crashed); undefined otherwise. */
  get crash(): WorkerExitError | undefined {
    return this.#lost instanceof IsolateEndedError ? undefined : this.#lost;
  }

  /**
   * Resident memory the worker process may reach while this run's block runs: `ownLimitMb` alone
   * in its own process, plus what the other runs of a shared process were last allowed.
   */
  processRssLimitMb(ownLimitMb: number): number {
    return this.#process.rssLimitMb(this.#sandbox, ownLimitMb);
  }

  /** Sends a command to the isolate; rejects with WorkerExitError once it is gone, in flight or not. */
  request(command: CommandWithoutId): Promise<Reply> {
    if (this.#lost) return Promise.reject(this.#lost);
    return new Promise<Reply>((resolve, reject) => {
      this.#inFlight.add(reject);
      this.#process.request(this.#sandbox, command).then(resolve, reject).finally(() => this.#inFlight.delete(reject));
    });
  }

  replyToHostCall(id: number, reply: string): void {
    if (this.alive) this.#process.replyToHostCall(this.#sandbox, id, reply);
  }

  onEvent(event: Parameters<HostedRun['onEvent']>[0]): void {
    if (this.#lost) return;
    if (event.type === 'hostCall') this.onHostCall?.(event.id, event.payload, 'sync');
    else if (event.type === 'hostCallAsync') this.onHostCall?.(event.id, event.payload, 'async');
    else this.onWaiting?.(event.calls);
  }

  onProcessExit(error: WorkerExitError): void {
    this.#markLost(error);
    this.#close();
  }

  /**
   * Ends the isolate at once (a block that will not stop, a caller that gave up): pending work
   * fails now. Its process ends it; one that does not answer within the grace period is killed.
   */
  kill(): void {
    if (this.#options.ownsProcess) {
      this.#process.kill();
      return;
    }
    if (this.#lost) return;
    this.#markLost(new IsolateEndedError());
    void this.#disposeInProcess();
  }

  /** Ends the isolate and resolves once it is gone (with `process` isolation: once its process has exited). */
  async stop(): Promise<void> {
    if (this.#options.ownsProcess) {
      await this.#process.stop();
      this.#close();
      return;
    }
    if (!this.#lost) this.#markLost(new IsolateEndedError());
    await this.#disposeInProcess();
  }

  async #disposeInProcess(): Promise<void> {
    if (this.#closed || !this.#process.alive) return this.#close();
    const unresponsive = setTimeout(() => this.#process.kill(), DEFAULTS.sandbox.watchdogGraceMs);
    try {
      await this.#process.request(this.#sandbox, { type: 'dispose' });
    } catch {
      // the process stopped meanwhile: the isolate is gone with it
    } finally {
      clearTimeout(unresponsive);
      this.#close();
    }
  }

  #markLost(error: WorkerExitError): void {
    this.#lost ??= error;
    for (const reject of this.#inFlight) reject(this.#lost);
    this.#inFlight.clear();
  }

  #close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#process.removeRun(this.#sandbox);
    this.#options.onClose();
  }
}
