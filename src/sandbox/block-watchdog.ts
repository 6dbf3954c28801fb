import { DEFAULTS } from '../defaults.js';
import type { ResetReason } from './block-result.js';
import { readResidentMemoryMb } from './resident-memory.js';
import type { IsolateHandle } from './isolate-handle.js';

interface BlockWatchdogLimits {
  /** Wall time the block may run, not counting `hostWaitMs`. */
  timeLimitMs: number;
  /** Resident memory the run may cost its worker process (see IsolateHandle.processRssLimitMb). */
  rssLimitMb: number;
  /** Time the block has spent waiting for host calls so far. */
  hostWaitMs: () => number;
}

/**
 * The isolate enforces the block timeout and heap limit itself. The watchdog is for a worker that
 * cannot: one wedged in V8's fatal out-of-memory path (only killing the process ends it), or one
 * whose memory grows where the heap limit does not look. It ends the block's isolate (with
 * `process` isolation, its process) and records why. In a shared process the resident memory
 * checked is the process's, against the sum of what its runs may cost: the run whose block is
 * running while it grows past that is the one ended.
 */
export class BlockWatchdog {
  readonly #worker: IsolateHandle;
  readonly #limits: BlockWatchdogLimits;
  readonly #started = performance.now();
  readonly #timer: NodeJS.Timeout;
  #verdict: ResetReason | undefined;

  constructor(worker: IsolateHandle, limits: BlockWatchdogLimits) {
    this.#worker = worker;
    this.#limits = limits;
    this.#timer = setInterval(() => this.#check(), Math.min(DEFAULTS.sandbox.watchdogIntervalMs, limits.timeLimitMs));
  }

  /** Why the watchdog killed the worker; undefined if it did not. */
  get verdict(): ResetReason | undefined {
    return this.#verdict;
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  #check(): void {
    if (performance.now() - this.#started - this.#limits.hostWaitMs() > this.#limits.timeLimitMs) this.#kill('unresponsive');
    const rssMb = this.#worker.pid === undefined ? undefined : readResidentMemoryMb(this.#worker.pid);
    if (rssMb !== undefined && rssMb > this.#worker.processRssLimitMb(this.#limits.rssLimitMb)) this.#kill('resident-memory');
  }

  #kill(reason: ResetReason): void {
    this.#verdict ??= reason;
    this.#worker.kill();
  }
}
