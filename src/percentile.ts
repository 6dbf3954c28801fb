/**
 * The nearest-rank percentile of `sorted` (ascending): the smallest value with at least `share` of
 * the values at or below it; undefined for no values. One definition for every summary, so the
 * batch summary and the batch page never disagree on a p95.
 */
export function percentile(sorted: readonly number[], share: number): number | undefined {
  if (sorted.length === 0) return undefined;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(share * sorted.length) - 1))];
}
