import PQueue from 'p-queue';
import { DEFAULTS } from '../defaults.js';
import { ConfigurationError } from '../errors.js';

/** One p-queue per key (a model name, a depth of the run tree), created on first use. */
export class KeyedQueues<Key> {
  private readonly queues = new Map<Key, PQueue>();

  constructor(readonly concurrency: number) {
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      throw new ConfigurationError(`concurrency must be a whole number >= 1, got ${concurrency}`);
    }
  }

  /** Runs `task` when `key` has a free slot. Queued work is dropped when `signal` aborts. */
  run<T>(key: Key, task: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    return this.queueOf(key).add(task, { signal }) as Promise<T>;
  }

  protected queueOf(key: Key): PQueue {
    let queue = this.queues.get(key);
    if (!queue) {
      queue = new PQueue({ concurrency: this.concurrency });
      this.queues.set(key, queue);
    }
    return queue;
  }

  /** Tasks waiting for a slot, over all keys. */
  get waiting(): number {
    let total = 0;
    for (const queue of this.queues.values()) total += queue.size;
    return total;
  }

  /** Tasks holding a slot, over all keys. */
  get running(): number {
    let total = 0;
    for (const queue of this.queues.values()) total += queue.pending;
    return total;
  }
}

/**
 * Limits how many requests run at once against each model. One scheduler is shared by a run and
 * all of its child runs, and may be shared by many runs (the `scheduler` RLM option: a batch's
 * tasks). Only the HTTP call itself holds a slot: a caller that waits for other work (a tool loop,
 * a child run) holds none, so nested waits cannot deadlock.
 */
export class ModelScheduler extends KeyedQueues<string> {
  private readonly pausedUntil = new Map<string, { until: number; timer: NodeJS.Timeout }>();

  constructor(concurrency: number = DEFAULTS.lm.maxConcurrency) {
    super(concurrency);
  }

  /**
   * Starts no request to `model` for `ms` (a server's retry-after): a rate limit is the server's
   * answer to everyone who calls it, so every run sharing this scheduler waits, not only the
   * request that was told. Requests already in flight go on. A later, longer pause extends it.
   */
  pauseModel(model: string, ms: number): void {
    if (!(ms > 0)) return;
    const until = Date.now() + Math.min(ms, MAX_PAUSE_MS);
    const current = this.pausedUntil.get(model);
    if (current && current.until >= until) return;
    if (current) clearTimeout(current.timer);
    const queue = this.queueOf(model);
    queue.pause();
    const timer = setTimeout(() => {
      this.pausedUntil.delete(model);
      queue.start();
    }, until - Date.now());
    // A pause must not keep a finished program alive.
    timer.unref?.();
    this.pausedUntil.set(model, { until, timer });
  }
}

/** No server's retry-after holds a model's queue longer than this (a bad header must not stall a batch). */
const MAX_PAUSE_MS = DEFAULTS.lm.maxRetryDelayMs;
