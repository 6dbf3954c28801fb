import { availableParallelism } from 'node:os';
import { DEFAULTS } from '../defaults.js';
import { IsolateHandle } from './isolate-handle.js';
import { readResidentMemoryMb } from './resident-memory.js';
import { WorkerProcess } from './worker-process.js';

/**
 * How sandboxes are separated from each other. `isolate` (the default): each run gets a fresh V8
 * isolate of its own (own heap and heap limit, own built-ins) in a worker process shared with other
 * runs; a catastrophic allocation that takes the process down ends the runs it hosts. `process`:
 * each run gets a worker process of its own, never reused.
 */
export type Isolation = 'isolate' | 'process';

/**
 * The worker processes sandboxes live in. Shared processes (`isolate` isolation) number at most
 * one per core; a run goes to the one hosting fewest runs, and a new process starts while every
 * running one is busy, so the next run finds it warm. A process is retired (takes no new runs,
 * ends once its last run has) after a number of runs or once its resident memory passes a bound
 * (see DEFAULTS.sandbox and setRecycling). A process that stops is replaced at once.
 *
 * `process` isolation keeps spare processes instead: starting Node and loading isolated-vm takes a
 * few hundred milliseconds, taking a warm process none. No worker ever keeps the host alive.
 */
class SandboxPool {
  private readonly shared: WorkerProcess[] = [];
  private readonly spares: WorkerProcess[] = [];
  private refillScheduled = false;
  /** Most shared processes at once: one per core (the isolates' own threads do the computing). */
  private readonly maxShared = Math.max(1, Math.min(availableParallelism(), DEFAULTS.sandbox.maxWorkerProcesses));

  private recycling: { runsPerWorker: number; rssMb: number } = { runsPerWorker: DEFAULTS.sandbox.runsPerWorker, rssMb: DEFAULTS.sandbox.workerRecycleRssMb };

  constructor(private spareCount: number) {}

  /** Changes when shared processes are retired: after `runsPerWorker` runs, or past `rssMb` of resident memory. */
  setRecycling(recycling: Partial<{ runsPerWorker: number; rssMb: number }>): void {
    this.recycling = { ...this.recycling, ...recycling };
  }

  /** A handle on a fresh isolate (its process may still be starting): send it `init` first. */
  open(isolation: Isolation): IsolateHandle {
    if (isolation === 'process') {
      const own = this.takeSpare();
      return new IsolateHandle(own, { ownsProcess: true, onClose: () => {} });
    }
    const host = this.sharedProcess();
    const handle = new IsolateHandle(host, { ownsProcess: false, onClose: () => this.afterRunClosed(host) });
    this.retireIfWorn(host);
    return handle;
  }

  /** Keeps at least `count` spare processes for `process` isolation from now on (a run that will start child sandboxes asks for more). */
  reserve(count: number): void {
    this.spareCount = Math.max(this.spareCount, count);
    this.refillSoon();
  }

  /** Starts processes now, e.g. while a caller is still reading its input. */
  refill(isolation: Isolation = 'isolate'): void {
    if (isolation === 'process') {
      while (this.spares.length < this.spareCount) this.spares.push(new WorkerProcess({ oneRun: true }));
    } else if (this.shared.length === 0) {
      this.startShared();
    }
  }

  /** Starts processes and resolves when they can take work. */
  async warm(isolation: Isolation = 'isolate'): Promise<void> {
    this.refill(isolation);
    await Promise.all((isolation === 'process' ? this.spares : this.shared).map((worker) => worker.whenReady()));
  }

  /** Stops the spares and the shared processes no run uses (tests and benchmarks use this to measure cold starts). */
  drain(): void {
    for (const worker of this.spares.splice(0)) worker.kill();
    for (const worker of this.shared.filter((each) => each.runCount === 0)) {
      this.forget(worker);
      worker.kill();
    }
  }

  /** Pids of the shared processes taking runs now (for monitoring and tests). */
  get sharedProcessIds(): number[] {
    return this.shared.flatMap((worker) => (worker.pid === undefined ? [] : [worker.pid]));
  }

  private sharedProcess(): WorkerProcess {
    const live = this.shared.filter((worker) => worker.alive);
    const least = live.reduce<WorkerProcess | undefined>((best, worker) => (best === undefined || worker.runCount < best.runCount ? worker : best), undefined);
    // Every process busy and room for another: start it now, for the runs after this one.
    if (live.length < this.maxShared && (least === undefined || least.runCount > 0)) {
      const started = this.startShared();
      return least ?? started;
    }
    return least!;
  }

  private startShared(): WorkerProcess {
    const worker = new WorkerProcess({ oneRun: false });
    this.shared.push(worker);
    // A process that stopped on its own (a crash, a kill from outside) is replaced at once, for the
    // runs to come; one the host ended is replaced when a run needs it.
    worker.onExit(() => {
      if (this.forget(worker) && !worker.endedByHost) this.startShared();
    });
    return worker;
  }

  private retireIfWorn(worker: WorkerProcess): void {
    const rssMb = worker.pid === undefined ? undefined : readResidentMemoryMb(worker.pid);
    const worn = worker.runsStarted >= this.recycling.runsPerWorker || (rssMb !== undefined && rssMb > this.recycling.rssMb);
    if (!worn || !this.forget(worker)) return;
    this.startShared();
    if (worker.runCount === 0) void worker.stop();
  }

  private afterRunClosed(worker: WorkerProcess): void {
    // A retired process ends with its last run.
    if (worker.runCount === 0 && !this.shared.includes(worker)) void worker.stop();
  }

  /** Takes a process out of the shared list; false if it was not in it. */
  private forget(worker: WorkerProcess): boolean {
    const index = this.shared.indexOf(worker);
    if (index >= 0) this.shared.splice(index, 1);
    return index >= 0;
  }

  private takeSpare(): WorkerProcess {
    let worker: WorkerProcess | undefined;
    while ((worker = this.spares.shift()) && !worker.alive) {
      // a spare that died while waiting (killed from outside): skip it
    }
    this.refillSoon();
    return worker ?? new WorkerProcess({ oneRun: true });
  }

  // Spawning a process costs several milliseconds of this thread's time: do it after the caller's
  // current work (its first model request, say) is under way.
  private refillSoon(): void {
    if (this.refillScheduled) return;
    this.refillScheduled = true;
    setImmediate(() => {
      this.refillScheduled = false;
      this.refill('process');
    }).unref();
  }
}

export const workerPool = new SandboxPool(1);
