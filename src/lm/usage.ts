import { costUsd, DEFAULT_PRICES, findPrice, type PriceTable } from './prices.js';
import type { TokenUsage } from './types.js';

export interface ModelUsage {
  calls: number;
  inputTokens: number;
  outputTokens: number;
  /** USD, or null when no price is known for this model. */
  costUsd: number | null;
}

export interface UsageSummary {
  /** Per model name. */
  byModel: Record<string, ModelUsage>;
  calls: number;
  inputTokens: number;
  outputTokens: number;
  /**
   * USD over every model, or null when some model has no price: a sum that leaves models out would
   * read as the whole cost. `byModel` still has the cost of each priced model.
   */
  costUsd: number | null;
  /** False when some model has no price (and `costUsd` is then null). */
  costComplete: boolean;
}

/**
 * Counts calls, tokens and cost per model. A child tracker (`child()`) records into itself and
 * every ancestor, so each run sees its own usage and the root sees the whole tree.
 */
export class UsageTracker {
  private readonly models = new Map<string, { calls: number; inputTokens: number; outputTokens: number }>();

  constructor(
    private readonly prices: PriceTable = DEFAULT_PRICES,
    private readonly parent?: UsageTracker,
  ) {}

  /** A tracker for a child run that also counts toward this one. */
  child(): UsageTracker {
    return new UsageTracker(this.prices, this);
  }

  record(model: string, usage: TokenUsage): void {
    const entry = this.models.get(model) ?? { calls: 0, inputTokens: 0, outputTokens: 0 };
    entry.calls += 1;
    entry.inputTokens += usage.inputTokens;
    entry.outputTokens += usage.outputTokens;
    this.models.set(model, entry);
    this.parent?.record(model, usage);
  }

  hasPrice(model: string): boolean {
    return findPrice(model, this.prices) !== undefined;
  }

  /** USD for one call's usage, or null when the model has no known price. */
  costOf(model: string, usage: TokenUsage): number | null {
    const price = findPrice(model, this.prices);
    return price ? costUsd(price, usage.inputTokens, usage.outputTokens) : null;
  }

  summary(): UsageSummary {
    const byModel: Record<string, ModelUsage> = {};
    const totals = { byModel, calls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0, costComplete: true };
    for (const [model, entry] of this.models) {
      const price = findPrice(model, this.prices);
      const cost = price ? costUsd(price, entry.inputTokens, entry.outputTokens) : null;
      byModel[model] = { ...entry, costUsd: cost === null ? null : roundUsd(cost) };
      totals.calls += entry.calls;
      totals.inputTokens += entry.inputTokens;
      totals.outputTokens += entry.outputTokens;
      if (cost === null) totals.costComplete = false;
      else totals.costUsd += cost;
    }
    return { ...totals, costUsd: totals.costComplete ? roundUsd(totals.costUsd) : null };
  }
}

/** Sums of float prices pick up noise (0.0000024500000000000003): ten decimals are more than any price has. */
function roundUsd(usd: number): number {
  return Math.round(usd * 1e10) / 1e10;
}
