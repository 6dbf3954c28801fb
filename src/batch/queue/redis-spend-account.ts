import type { RedisClient } from 'bullmq';
import { chargeBatch, readBudget, type BatchKeys } from './batch-record.js';

/**
 * The batch's budget, shared by every worker through Redis. Model calls ask what is left
 * synchronously, between calls, so the account answers from what it last heard from Redis: every
 * charge's reply brings the total of all workers, and `refresh` (before each task starts) reads it.
 * Between the two, other machines' spending is seen late by at most the calls in flight, the same
 * overshoot one machine has with calls running at once.
 */
export class RedisSpendAccount {
  readonly #client: RedisClient;
  readonly #keys: BatchKeys;
  #budgetUsd: number | undefined;
  #spentUsd = 0;
  /** Charged here and not yet acknowledged by Redis. */
  #unconfirmedUsd = 0;
  #pending: Promise<unknown> = Promise.resolve();

  constructor({ client, keys }: { client: RedisClient; keys: BatchKeys }) {
    this.#client = client;
    this.#keys = keys;
  }

  /** The batch's budget, in USD; undefined when the batch has none. */
  get budgetUsd(): number | undefined {
    return this.#budgetUsd;
  }

  /** What is left of the budget, as last heard (Infinity without a budget). */
  remaining(): number {
    if (this.#budgetUsd === undefined) return Infinity;
    return Math.max(0, this.#budgetUsd - this.#spentUsd - this.#unconfirmedUsd);
  }

  /** Adds a cost; counted here at once, in Redis as soon as it answers. */
  charge(usd: number): void {
    if (!(usd > 0)) return;
    this.#unconfirmedUsd += usd;
    const charged = chargeBatch(this.#client, this.#keys, usd).then(
      (total) => {
        this.#unconfirmedUsd -= usd;
        this.#spentUsd = Math.max(this.#spentUsd, total);
      },
      // Redis unreachable: the cost stays counted here, and the charge is lost for other workers
      // (BullMQ will fail this worker's jobs on the same outage, and they run again).
      () => undefined,
    );
    this.#pending = Promise.all([this.#pending, charged]);
  }

  /** Reads the budget and what every worker has spent. */
  async refresh(): Promise<void> {
    const state = await readBudget(this.#client, this.#keys);
    this.#budgetUsd = state.budgetUsd;
    this.#spentUsd = Math.max(this.#spentUsd, state.spentUsd);
  }

  /** Resolves once every charge made so far has reached Redis (or failed to). */
  async settled(): Promise<void> {
    await this.#pending;
  }
}
