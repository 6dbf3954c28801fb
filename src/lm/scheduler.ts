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
    let queue = this.queues.get(key);
    if (!queue) {
      queue = new PQueue({ concurrency: this.concurrency });
      this.queues.set(key, queue);
    }
    return queue.add(task, { signal }) as Promise<T>;
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
 * all of its child runs. Only the HTTP call itself holds a slot: a caller that waits for other
 * work (a tool loop, a child run) holds none, so nested waits cannot deadlock.
 */
export class ModelScheduler extends KeyedQueues<string> {
  constructor(concurrency: number = DEFAULTS.lm.maxConcurrency) {
    super(concurrency);
  }
}
