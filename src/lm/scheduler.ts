import PQueue from 'p-queue';
import { DEFAULTS } from '../defaults.js';

/**
 * Limits how many requests run at once against each model. One scheduler is shared by a run and
 * all of its child runs. Only the HTTP call itself holds a slot: a caller that waits for other
 * work (a tool loop, a child run) holds none, so nested waits cannot deadlock.
 */
export class ModelScheduler {
  private readonly queues = new Map<string, PQueue>();

  constructor(readonly concurrency: number = DEFAULTS.lm.maxConcurrency) {
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      throw new RangeError(`concurrency must be a whole number >= 1, got ${concurrency}`);
    }
  }

  /** Runs `task` when `model` has a free slot. Queued work is dropped when `signal` aborts. */
  run<T>(model: string, task: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    let queue = this.queues.get(model);
    if (!queue) {
      queue = new PQueue({ concurrency: this.concurrency });
      this.queues.set(model, queue);
    }
    return queue.add(task, { signal }) as Promise<T>;
  }

  /** Requests waiting for a slot, over all models. */
  get waiting(): number {
    let total = 0;
    for (const queue of this.queues.values()) total += queue.size;
    return total;
  }

  /** Requests holding a slot, over all models. */
  get running(): number {
    let total = 0;
    for (const queue of this.queues.values()) total += queue.pending;
    return total;
  }
}
