import { percentile } from '../percentile.js';
import type { TaskRecord } from './results.js';

/** What a batch came to: built from the last record of each of its tasks. */
export interface BatchSummary {
  tasks: number;
  completed: number;
  failed: number;
  /** Tasks with no result: never started (the budget was spent, or the batch was stopped). */
  notRun: number;
  /** Failed tasks by error code. */
  failuresByCode: Record<string, number>;
  /** Mean score over the tasks that have `expected` (a failed one scores 0); null when none has. */
  accuracy: number | null;
  scored: number;
  /** USD; null when some model had no price. */
  cost: { totalUsd: number | null; meanUsd: number | null; p50Usd: number | null; p95Usd: number | null };
  durationMs: { p50: number | null; p95: number | null };
  iterations: { total: number; mean: number | null };
  tokensByModel: Record<string, { calls: number; inputTokens: number; outputTokens: number }>;
  mostExpensive: { id: string; costUsd: number }[];
  slowest: { id: string; durationMs: number }[];
}

/** The value below which `share` of the sorted values lie (nearest rank). */
function roundUsd(usd: number): number {
  return Math.round(usd * 1e10) / 1e10;
}

/**
 * Summarizes the records of a batch's tasks. `total` is the number of tasks in the batch; those
 * without a record count as not run. `scoredIds` are the tasks that have `expected`.
 */
export function summarize(records: TaskRecord[], total: number, scoredIds: ReadonlySet<string>): BatchSummary {
  const failuresByCode: Record<string, number> = {};
  for (const record of records) {
    if (record.status === 'failed') failuresByCode[record.error?.code ?? 'unknown'] = (failuresByCode[record.error?.code ?? 'unknown'] ?? 0) + 1;
  }
  const completed = records.filter((record) => record.status === 'completed').length;
  const costs = records.map((record) => record.cost_usd);
  const known = costs.filter((cost): cost is number => cost !== null).sort((a, b) => a - b);
  const costComplete = known.length === costs.length;
  const totalUsd = known.reduce((sum, cost) => sum + cost, 0);
  const durations = records.map((record) => record.duration_ms).sort((a, b) => a - b);
  const iterations = records.reduce((sum, record) => sum + record.iterations, 0);
  const scoredRecords = [...scoredIds].length;
  const scoreSum = records.filter((record) => scoredIds.has(record.id)).reduce((sum, record) => sum + (record.score ?? 0), 0);
  return {
    tasks: total,
    completed,
    failed: records.length - completed,
    notRun: total - records.length,
    failuresByCode,
    accuracy: scoredRecords === 0 ? null : scoreSum / scoredRecords,
    scored: scoredRecords,
    cost: {
      totalUsd: costComplete ? roundUsd(totalUsd) : null,
      meanUsd: costComplete && known.length > 0 ? roundUsd(totalUsd / known.length) : null,
      p50Usd: costComplete ? (percentile(known, 0.5) ?? null) : null,
      p95Usd: costComplete ? (percentile(known, 0.95) ?? null) : null,
    },
    durationMs: { p50: percentile(durations, 0.5) ?? null, p95: percentile(durations, 0.95) ?? null },
    iterations: { total: iterations, mean: records.length > 0 ? iterations / records.length : null },
    tokensByModel: tokensByModel(records),
    mostExpensive: records
      .filter((record) => record.cost_usd !== null)
      .sort((a, b) => b.cost_usd! - a.cost_usd!)
      .slice(0, 5)
      .map((record) => ({ id: record.id, costUsd: record.cost_usd! })),
    slowest: [...records]
      .sort((a, b) => b.duration_ms - a.duration_ms)
      .slice(0, 5)
      .map((record) => ({ id: record.id, durationMs: record.duration_ms })),
  };
}

function tokensByModel(records: TaskRecord[]): BatchSummary['tokensByModel'] {
  const byModel: BatchSummary['tokensByModel'] = {};
  for (const record of records) {
    for (const [model, usage] of Object.entries(record.usage.by_model)) {
      const entry = (byModel[model] ??= { calls: 0, inputTokens: 0, outputTokens: 0 });
      entry.calls += usage.calls;
      entry.inputTokens += usage.input_tokens;
      entry.outputTokens += usage.output_tokens;
    }
  }
  return byModel;
}
