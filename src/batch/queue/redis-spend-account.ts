import type { RedisClient } from 'bullmq';
import type { SpendAccount } from '../../engine/spend-account.js';
import { chargeBatch, readBudget, type BatchKeys } from './batch-record.js';

/**
 * The batch's budget, shared by every worker through Redis: each model call reads what is left
 * and each cost is added with one atomic HINCRBYFLOAT, so what many machines spend at once all
 * counts. A round trip per model call is small beside the call itself.
 */
export class RedisSpendAccount implements SpendAccount {
  readonly #client: RedisClient;
  readonly #keys: BatchKeys;

  constructor({ client, keys }: { client: RedisClient; keys: BatchKeys }) {
    this.#client = client;
    this.#keys = keys;
  }

  /** USD left of the batch's budget, Infinity when it has none. */
  async remaining(): Promise<number> {
    const { budgetUsd, spentUsd } = await readBudget(this.#client, this.#keys);
    return budgetUsd === undefined ? Infinity : budgetUsd - spentUsd;
  }

  async charge(usd: number): Promise<void> {
    if (Number.isFinite(usd) && usd > 0) await chargeBatch(this.#client, this.#keys, usd);
  }
}
