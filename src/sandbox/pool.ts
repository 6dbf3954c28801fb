import { WorkerProcess } from './worker-process.js';

/**
 * Keeps started worker processes in reserve. Starting Node and loading isolated-vm takes a few
 * hundred milliseconds; taking a warm worker takes none, so every sandbox after the first (child
 * RLMs, resets after a crash) starts quickly. Spare workers never keep the host process alive.
 */
class WorkerPool {
  private readonly spares: WorkerProcess[] = [];
  private refillScheduled = false;

  constructor(private spareCount: number) {}

  /** Keeps at least `count` spares from now on (a run that will start child sandboxes asks for more). */
  reserve(count: number): void {
    this.spareCount = Math.max(this.spareCount, count);
    this.refillSoon();
  }

  /** A worker that is ready or starting; a replacement starts in the background. */
  take(): WorkerProcess {
    let worker: WorkerProcess | undefined;
    while ((worker = this.spares.shift()) && !worker.alive) {
      // a spare that died while waiting (killed from outside): skip it
    }
    this.refillSoon();
    return worker ?? new WorkerProcess();
  }

  /** Starts spare workers now, e.g. while a caller is still reading its input. */
  refill(): void {
    while (this.spares.length < this.spareCount) this.spares.push(new WorkerProcess());
  }

  /** Starts spare workers and resolves when they can take work. */
  async warm(): Promise<void> {
    this.refill();
    await Promise.all(this.spares.map((worker) => worker.whenReady()));
  }

  // Spawning a process costs several milliseconds of this thread's time: do it after the caller's
  // current work (its first model request, say) is under way.
  private refillSoon(): void {
    if (this.refillScheduled) return;
    this.refillScheduled = true;
    setImmediate(() => {
      this.refillScheduled = false;
      this.refill();
    }).unref();
  }

  /** Stops the spares (tests and benchmarks use this to measure cold starts). */
  drain(): void {
    for (const worker of this.spares.splice(0)) worker.kill();
  }
}

export const workerPool = new WorkerPool(1);
