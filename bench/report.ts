/** Settings the benchmarks share: runs per figure (its median is printed), and the model traffic of the sub-call benchmarks. */
export const RUNS = 3;
export const LATENCY_MS = 50;
export const CONCURRENCY = 16;

/** Prints a benchmark table with aligned columns. */
export function printTable(title: string, header: string[], rows: string[][]): void {
  const widths = header.map((cell, column) => Math.max(cell.length, ...rows.map((row) => (row[column] ?? '').length)));
  const line = (cells: string[]) => cells.map((cell, column) => cell.padEnd(widths[column]!)).join('  ');
  console.log(`\n${title}`);
  console.log(line(header));
  console.log(widths.map((width) => '-'.repeat(width)).join('  '));
  for (const row of rows) console.log(line(row));
}

// Three decimals below 0.1 ms, where per-call costs of pipes and host calls sit.
export const ms = (value: number) => `${value.toFixed(Math.abs(value) < 0.1 ? 3 : Math.abs(value) < 10 ? 2 : 1)} ms`;
export const ratio = (value: number, baseline: number) => `${(value / baseline).toFixed(2)}x`;

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}
