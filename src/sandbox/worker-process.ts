import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import { SandboxError } from '../errors.js';
import { sandboxWorkerPath } from '../paths.js';
import { encodeFrame, FrameDecoder } from './framing.js';
import { trackWorker } from './live-workers.js';
import type { WorkerCommand, WorkerEvent } from './protocol.js';
import { ONE_RUN_FLAG } from './shared.js';

type RunEvent = Exclude<WorkerEvent, { type: 'ready' }>;
export type Reply = Exclude<RunEvent, { type: 'hostCall' | 'hostCallAsync' | 'waiting' }>;
/** A command as a caller gives it: the process numbers it, the isolate's handle names its sandbox. */
export type CommandWithoutId = WorkerCommand extends infer C ? (C extends { id: number; sandbox: number } ? Omit<C, 'id' | 'sandbox'> : never) : never;

const STDERR_TAIL_CHARS = 4_000;

/** What a process reports for the isolates it hosts: calls, waits, and its end. */
export interface HostedRun {
  onEvent(event: Extract<RunEvent, { type: 'hostCall' | 'hostCallAsync' | 'waiting' }>): void;
  onProcessExit(error: WorkerExitError): void;
}

/**
 * A sandbox's isolate went away with its worker process, or was ended while the host still needed
 * it. `code` is `sandbox_crashed`; the message names the cause and, for a process that hosted
 * several runs, that all of them were lost.
 */
export class WorkerExitError extends SandboxError {
  override name = 'WorkerExitError';
  /** The cause in a few words, for the block result of a run that lost its sandbox. */
  readonly causeText: string;
  constructor(
    readonly exitCode: number | null,
    readonly signal: NodeJS.Signals | null,
    readonly stderrTail: string,
    hostedRuns = 1,
  ) {
    super('sandbox_crashed', crashMessage(exitCode, signal, stderrTail, hostedRuns));
    this.causeText = crashCause(signal, stderrTail) + (hostedRuns > 1 ? `; the process hosted ${hostedRuns} runs, all of which lost their sandbox` : '');
  }
}

function crashMessage(exitCode: number | null, signal: NodeJS.Signals | null, stderrTail: string, hostedRuns: number): string {
  const shared = hostedRuns > 1 ? `, ending all ${hostedRuns} runs it hosted` : '';
  const detail = stderrTail.trim() ? `: ${stderrTail.trim().slice(-500)}` : '';
  return `The sandbox worker process stopped (code ${exitCode}, signal ${signal}${shared}); cause: ${crashCause(signal, stderrTail)}${detail}`;
}

/** What most likely ended a worker, read from how it ended and what V8 printed. */
function crashCause(signal: NodeJS.Signals | null, stderrTail: string): string {
  if (/out of memory|heap limit|OOM|allocation failed/i.test(stderrTail)) return 'V8 ran out of memory (a catastrophic allocation in model code)';
  if (signal === 'SIGKILL') return 'the process was killed (by the sandbox watchdog, the system out-of-memory killer, or from outside)';
  if (signal) return `the process received ${signal}`;
  return 'the process exited unexpectedly';
}

/**
 * The host's handle on one worker child process: spawns it, frames commands, matches replies and
 * routes each run's events to the handle of the isolate they name. An idle process does not keep
 * the host's event loop alive.
 */
export class WorkerProcess {
  private readonly ready: Promise<void>;
  private readonly child: ChildProcess;
  private readonly input: Writable;
  private readonly output: Readable;
  private readonly decoder = new FrameDecoder<WorkerEvent>();
  private readonly pending = new Map<number, { resolve: (reply: Reply) => void; reject: (error: Error) => void }>();
  private readonly runs = new Map<number, HostedRun>();
  /** The resident memory each run was last allowed (see rssLimitMb). */
  private readonly rssAllowances = new Map<number, number>();
  private nextId = 1;
  private stderrTail = '';
  private exitError: WorkerExitError | undefined;
  private readonly exitListeners = new Set<(error: WorkerExitError) => void>();
  private holds = 0;
  private readonly untrack: () => void;
  /** Runs this process was given over its life (see SandboxPool's recycling). */
  runsStarted = 0;
  /** Whether the host ended the process (kill, stop), rather than it stopping on its own. */
  endedByHost = false;

  /** `oneRun`: the process will host a single run (`isolation: 'process'`). */
  constructor(options: { oneRun: boolean }) {
    const script = sandboxWorkerPath();
    if (!existsSync(script)) {
      throw new SandboxError('sandbox_start_failed', `the sandbox worker is not built (${script} is missing): run "npm run build"`);
    }
    // --expose-gc gives each isolate a gc() the prelude keeps for itself (see heapLeftFull in worker-isolate.ts).
    this.child = spawn(process.execPath, ['--no-node-snapshot', '--expose-gc', script, ...(options.oneRun ? [ONE_RUN_FLAG] : [])], {
      // The worker needs nothing from the host's environment, and API keys must not be in it.
      env: {},
      // 3: worker -> host frames, 4: host -> worker frames
      stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'],
    });
    this.output = this.child.stdio[3] as Readable;
    this.input = this.child.stdio[4] as Writable;
    this.child.stderr!.setEncoding('utf8');
    this.child.stderr!.on('data', (text: string) => {
      this.stderrTail = (this.stderrTail + text).slice(-STDERR_TAIL_CHARS);
    });
    this.input.on('error', () => {}); // a dead worker is reported through 'exit'

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
        else if (event.type === 'hostCall' || event.type === 'hostCallAsync' || event.type === 'waiting') this.runs.get(event.sandbox)?.onEvent(event);
        else this.settle(event);
      }
    });
    this.untrack = trackWorker(this);
    this.child.on('exit', (code, signal) => {
      this.untrack();
      this.exitError = new WorkerExitError(code, signal, this.stderrTail, this.runs.size);
      failReady(this.exitError);
      for (const { reject } of this.pending.values()) reject(this.exitError);
      this.pending.clear();
      for (const run of this.runs.values()) run.onProcessExit(this.exitError);
      this.runs.clear();
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

  /** Isolates hosted now. */
  get runCount(): number {
    return this.runs.size;
  }

  /** Routes the events of sandbox `sandbox` to `run` until `removeRun`. */
  addRun(sandbox: number, run: HostedRun): void {
    this.runs.set(sandbox, run);
    this.runsStarted++;
  }

  removeRun(sandbox: number): void {
    this.runs.delete(sandbox);
    this.rssAllowances.delete(sandbox);
  }

  /** Records `sandbox`'s allowance and returns what the process may reach: the sum over its runs. */
  rssLimitMb(sandbox: number, allowanceMb: number): number {
    this.rssAllowances.set(sandbox, allowanceMb);
    let total = 0;
    for (const each of this.rssAllowances.values()) total += each;
    return total;
  }

  /** Sends a command to a sandbox's isolate and resolves with its reply; rejects with WorkerExitError if the process dies. */
  request(sandbox: number, command: CommandWithoutId): Promise<Reply> {
    if (this.exitError) return Promise.reject(this.exitError);
    const id = this.nextId++;
    const promise = new Promise<Reply>((resolve, reject) => this.pending.set(id, { resolve, reject }));
    this.hold();
    this.write({ ...command, id, sandbox } as WorkerCommand);
    return promise.finally(() => this.release());
  }

  replyToHostCall(sandbox: number, id: number, reply: string): void {
    if (this.alive) this.write({ type: 'hostReply', sandbox, id, payload: reply });
  }

  onExit(listener: (error: WorkerExitError) => void): () => void {
    this.exitListeners.add(listener);
    return () => this.exitListeners.delete(listener);
  }

  kill(): void {
    if (!this.alive) return;
    this.endedByHost = true;
    this.child.kill('SIGKILL');
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
    this.endedByHost = true;
    this.child.kill('SIGKILL');
    return exited;
  }

  private write(command: WorkerCommand) {
    this.input.write(encodeFrame(command));
  }

  private settle(reply: Reply) {
    const waiter = this.pending.get(reply.id);
    if (!waiter) return;
    this.pending.delete(reply.id);
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
    const handles = [this.child, this.output, this.input, this.child.stderr] as unknown as { ref(): void; unref(): void }[];
    for (const handle of handles) {
      if (keep) handle?.ref?.();
      else handle?.unref?.();
    }
  }
}
