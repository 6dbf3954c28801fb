/**
 * USD per million tokens. A small table of well-known models: edit it, or pass your own prices
 * (`prices` option, `--price` flag) for anything else. Prices change; check your provider's page.
 */
export interface ModelPrice {
  inputPerMillion: number;
  outputPerMillion: number;
}

export type PriceTable = Record<string, ModelPrice>;

export const DEFAULT_PRICES: PriceTable = {
  'gpt-5': { inputPerMillion: 1.25, outputPerMillion: 10 },
  'gpt-5-mini': { inputPerMillion: 0.25, outputPerMillion: 2 },
  'gpt-5-nano': { inputPerMillion: 0.05, outputPerMillion: 0.4 },
  'gpt-4.1': { inputPerMillion: 2, outputPerMillion: 8 },
  'gpt-4.1-mini': { inputPerMillion: 0.4, outputPerMillion: 1.6 },
  'gpt-4.1-nano': { inputPerMillion: 0.1, outputPerMillion: 0.4 },
  'gpt-4o': { inputPerMillion: 2.5, outputPerMillion: 10 },
  'gpt-4o-mini': { inputPerMillion: 0.15, outputPerMillion: 0.6 },
  o3: { inputPerMillion: 2, outputPerMillion: 8 },
  'o4-mini': { inputPerMillion: 1.1, outputPerMillion: 4.4 },
};

/**
 * Finds a model's price: an exact name first, then without a provider prefix (`openai/gpt-4o`)
 * and without a date suffix (`gpt-4o-2024-08-06`).
 */
export function findPrice(model: string, prices: PriceTable): ModelPrice | undefined {
  const withoutProvider = model.includes('/') ? model.slice(model.lastIndexOf('/') + 1) : model;
  const withoutDate = withoutProvider.replace(/-\d{4}-\d{2}-\d{2}$/, '');
  return prices[model] ?? prices[withoutProvider] ?? prices[withoutDate];
}

export function costUsd(price: ModelPrice, inputTokens: number, outputTokens: number): number {
  return (inputTokens * price.inputPerMillion + outputTokens * price.outputPerMillion) / 1_000_000;
}
