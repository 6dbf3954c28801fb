import { ConfigurationError } from '../errors.js';

/**
 * Money shared by many runs (the tasks of a batch): every model call of every run is checked
 * against what is left before it starts and charged with its cost when it ends. The methods may be
 * asynchronous so that an account can live outside this process (one account for the workers of a
 * batch on many machines); `MemorySpendAccount` keeps it in memory.
 */
export interface SpendAccount {
  /** USD left; zero or less once spent. */
  remaining(): number | Promise<number>;
  /** Adds the cost of one model call, in USD. */
  charge(usd: number): void | Promise<void>;
}

/** A spend account in this process's memory. */
export class MemorySpendAccount implements SpendAccount {
  #spentUsd = 0;

  constructor(readonly limitUsd: number) {
    if (!(limitUsd > 0) || !Number.isFinite(limitUsd)) throw new ConfigurationError(`A spend account needs a budget in USD greater than 0, got ${limitUsd}.`);
  }

  get spentUsd(): number {
    return this.#spentUsd;
  }

  remaining(): number {
    return this.limitUsd - this.#spentUsd;
  }

  charge(usd: number): void {
    if (Number.isFinite(usd) && usd > 0) this.#spentUsd += usd;
  }
}
