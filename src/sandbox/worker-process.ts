import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import { SandboxError } from '../errors.js';
import { sandboxWorkerPath } from '../paths.js';
import { encodeFrame, FrameDecoder } from './framing.js';
import { trackWorker } from './live-workers.js';
import type { WorkerCommand, WorkerEvent } from './protocol.js';

type Reply = Exclude<WorkerEvent, { type: 'ready' | 'hostCall' | 'hostCallAsync' | 'waiting' }>;
/** `async`: model code awaits the call and may make more meanwhile (see the `waiting` event). */
export type HostCallMode = 'sync' | 'async';
/** A command as a caller gives it: `request` numbers it. */
export type CommandWithoutId = WorkerCommand extends infer C ? (C extends { id: number } ? Omit<C, 'id'> : never) : never;

const STDERR_TAIL_CHARS = 4_000;
const DOORBELL_RING = Buffer.from([1]);

/** Why a worker process went away while the host still needed it. */
export class WorkerExitError extends SandboxError {
  override name = 'WorkerExitError';
  constructor(
    readonly exitCode: number | null,
    readonly signal: NodeJS.Signals | null,
    readonly stderrTail: string,
  ) {
    super('sandbox_worker_exited', `sandbox worker exited (code ${exitCode}, signal ${signal})${stderrTail ? `: ${stderrTail.trim().slice(-500)}` : ''}`);
  }
}

/**
 * The host's handle on one worker child process: spawns it, frames commands, matches replies and
 * forwards host calls. A worker that is idle does not keep the host's event loop alive.
 */
export class WorkerProcess {
  private readonly ready: Promise<void>;
  /** Called for every host call model code makes; answer with `replyToHostCall`. */
  onHostCall: ((id: number, request: string, mode: HostCallMode) => void) | undefined;
  /** Called when the running block cannot go on until one of these async calls is answered. */
  onWaiting: ((calls: number[]) => void) | undefined;

  private readonly child: ChildProcess;
  private readonly input: Writable;
  private readonly doorbell: Writable;
  private readonly output: Readable;
  private readonly decoder = new FrameDecoder<WorkerEvent>();
  private readonly pending = new Map<number, { resolve: (reply: Reply) => void; reject: (error: Error) => void }>();
  private nextId = 1;
  private stderrTail = '';
  private exitError: WorkerExitError | undefined;
  private readonly exitListeners = new Set<(error: WorkerExitError) => void>();
  private holds = 0;
  private readonly untrack: () => void;

  constructor() {
    const script = sandboxWorkerPath();
    if (!existsSync(script)) {
      throw new SandboxError('sandbox_start_failed', `the sandbox worker is not built (${script} is missing): run "npm run build"`);
    }
    // --expose-gc gives each isolate a gc() the prelude keeps for itself (see heapLeftFull in worker.ts).
    this.child = spawn(process.execPath, ['--no-node-snapshot', '--expose-gc', script], {
      // The worker needs nothing from the host's environment, and API keys must not be in it.
      env: {},
      // 3: worker -> host frames, 4: host -> worker frames, 5: doorbell rung after each host-call reply
      stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe', 'pipe'],
    });
    this.output = this.child.stdio[3] as Readable;
    this.input = this.child.stdio[4] as Writable;
    this.doorbell = (this.child.stdio as unknown as Writable[])[5]!;
    this.child.stderr!.setEncoding('utf8');
    this.child.stderr!.on('data', (text: string) => {
      this.stderrTail = (this.stderrTail + text).slice(-STDERR_TAIL_CHARS);
    });
    this.input.on('error', () => {}); // a dead worker is reported through 'exit'
    this.doorbell.on('error', () => {});

    let markReady!: () => void;
    let failReady!: (error: Error) => void;
    this.ready = new Promise<void>((resolve, reject) => {
      markReady = resolve;
      failReady = reject;
    });
    this.ready.catch(() => {}); // observed by whoever awaits it; never an unhandled rejection

    this.output.on('data', (chunk: Buffer) => {
      this.decoder.push(chunk);
      for (let event = this.decoder.next(); event; event = this.decoder.next()) {
        if (event.type === 'ready') markReady();
        else if (event.type === 'hostCall') this.onHostCall?.(event.id, event.payload, 'sync');
        else if (event.type === 'hostCallAsync') this.onHostCall?.(event.id, event.payload, 'async');
        else if (event.type === 'waiting') this.onWaiting?.(event.calls);
        else this.settle(event);
      }
    });
    this.untrack = trackWorker(this);
    this.child.on('exit', (code, signal) => {
      this.untrack();
      this.exitError = new WorkerExitError(code, signal, this.stderrTail);
      failReady(this.exitError);
      for (const { reject } of this.pending.values()) reject(this.exitError);
      this.pending.clear();
      for (const listener of this.exitListeners) listener(this.exitError);
    });
    this.child.on('error', (error) => {
      this.untrack();
      failReady(error);
    });
    this.setKeepsHostAlive(false);
  }

  /** Resolves when the worker has loaded isolated-vm and can take commands. */
  async whenReady(): Promise<void> {
    this.hold();
    try {
      await this.ready;
    } finally {
      this.release();
    }
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get alive(): boolean {
    return this.exitError === undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Sends a command and resolves with its reply; rejects with WorkerExitError if the worker dies. */
  request(command: CommandWithoutId): Promise<Reply> {
    if (this.exitError) return Promise.reject(this.exitError);
    const id = this.nextId++;
    const promise = new Promise<Reply>((resolve, reject) => this.pending.set(id, { resolve, reject }));
    this.hold();
    this.write({ ...command, id } as WorkerCommand);
    return promise.finally(() => this.release());
  }

  replyToHostCall(id: number, reply: string): void {
    if (!this.alive) return;
    this.write({ type: 'hostReply', id, payload: reply });
    this.doorbell.write(DOORBELL_RING);
  }

  onExit(listener: (error: WorkerExitError) => void): () => void {
    this.exitListeners.add(listener);
    return () => this.exitListeners.delete(listener);
  }

  kill(): void {
    if (this.alive) this.child.kill('SIGKILL');
  }

  /** Kills the process and resolves once it has exited, so nothing of it outlives the caller. */
  stop(): Promise<void> {
    if (this.exitError || this.child.pid === undefined) {
      this.untrack(); // a process that never started has nothing to wait for
      return Promise.resolve();
    }
    const exited = new Promise<void>((resolve) => this.onExit(() => resolve()));
    // A spare or idle worker does not keep the event loop alive; its exit must be waited for.
    this.hold();
    this.child.kill('SIGKILL');
    return exited;
  }

  private write(command: WorkerCommand) {
    this.input.write(encodeFrame(command));
  }

  private settle(reply: Reply) {
    const id = 'id' in reply ? reply.id : undefined;
    const waiter = id === undefined ? undefined : this.pending.get(id);
    if (!waiter || id === undefined) return;
    this.pending.delete(id);
    waiter.resolve(reply);
  }

  // A warm or idle worker must not stop the host process from exiting; a busy one must keep it up.
  private hold() {
    if (this.holds++ === 0) this.setKeepsHostAlive(true);
  }

  private release() {
    if (--this.holds === 0) this.setKeepsHostAlive(false);
  }

  private setKeepsHostAlive(keep: boolean) {
    const handles = [this.child, this.output, this.input, this.doorbell, this.child.stderr] as unknown as { ref(): void; unref(): void }[];
    for (const handle of handles) {
      if (keep) handle?.ref?.();
      else handle?.unref?.();
    }
  }
}
