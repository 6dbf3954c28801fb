import { loadScorer, readTasksFile, runBatch, type BatchResult } from '../index.js';
import { BatchProgress } from './batch-progress.js';
import type { CommandIo } from './io.js';
import { formatCost, formatTokens } from './progress.js';
import { buildOptions } from './run-command.js';
import type { RunOptionFlags } from './run-options.js';
import { Interruption } from './stop-signals.js';
import { EXIT, UsageError } from './usage-error.js';

/** The flags of `rlm batch`, as commander parses them. */
export interface BatchFlags extends RunOptionFlags {
  out?: string;
  concurrency?: number;
  taskBudget?: number;
  scorer?: string;
  dataDir?: string;
  retryFailed?: boolean;
  attempts?: number;
  quiet?: boolean;
  json?: boolean;
  model?: string;
  subModel?: string;
}

/** `rlm batch TASKS.jsonl --out RESULTS.jsonl`: runs every task, prints the summary, returns the exit code. */
export async function batchCommand(tasksPath: string, flags: BatchFlags, io: CommandIo): Promise<number> {
  if (!flags.out) throw new UsageError(`Give the results file with --out, e.g. rlm batch ${tasksPath} --out results.jsonl (running the same command again resumes it).`);
  // The tasks file is checked whole (lines, paths, schemas) before any configuration or model call.
  const tasks = readTasksFile(tasksPath, { dataDir: flags.dataDir });
  const scorer = flags.scorer === undefined ? undefined : await loadScorer(flags.scorer);
  // --max-budget is the batch's; --task-budget is each run's.
  const { maxBudgetUsd: _perRun, ...options } = await buildOptions(flags, io);
  const mode = flags.quiet ? 'quiet' : io.stderr.isTTY ? 'live' : 'lines';
  const progress = new BatchProgress(mode, io.stderr, tasks.length);
  let summary: BatchResult;
  try {
    summary = await runBatch({
      ...options,
      tasks,
      out: flags.out,
      ...(flags.concurrency !== undefined && { concurrency: flags.concurrency }),
      ...(flags.maxBudget !== undefined && { maxBudgetUsd: flags.maxBudget }),
      ...(flags.taskBudget !== undefined && { taskBudgetUsd: flags.taskBudget }),
      ...(scorer && { scorer }),
      retryFailed: Boolean(flags.retryFailed),
      ...(flags.attempts !== undefined && { attempts: flags.attempts }),
      signal: io.interrupt,
      onEvent: progress.handle,
    });
  } finally {
    progress.stop();
  }
  io.stdout.write(flags.json ? `${JSON.stringify(summary, null, 2)}\n` : summaryText(summary, flags.out));
  return exitCode(summary, io);
}

export function exitCode(summary: BatchResult, io: CommandIo): number {
  if (summary.stoppedBy === 'signal') {
    const reason: unknown = io.interrupt.reason;
    const interruption = reason instanceof Interruption ? reason : undefined;
    io.stderr.write(`rlm: ${interruption?.message ?? 'interrupted'}; finished tasks are kept, and running the same command again runs the rest.\n`);
    return interruption?.exitCode ?? EXIT.interrupted;
  }
  if (summary.stoppedBy === 'budget') io.stderr.write(`rlm: the batch budget is spent: ${summary.notRun} tasks were not started. Raise --max-budget and run the same command again to go on.\n`);
  return summary.failed > 0 || summary.notRun > 0 ? EXIT.failed : EXIT.ok;
}

const usd = (value: number | null) => (value === null ? 'unknown (a model has no price)' : `$${value.toFixed(value < 1 ? 6 : 2)}`);
const ms = (value: number | null) => (value === null ? '-' : `${(value / 1000).toFixed(1)}s`);

/** The summary as people read it. */
export function summaryText(summary: BatchResult, out: string): string {
  const lines = [
    `${summary.tasks} tasks: ${summary.completed} completed, ${summary.failed} failed, ${summary.notRun} not run`,
    ...Object.entries(summary.failuresByCode).map(([code, count]) => `  failed with ${code}: ${count}`),
    ...(summary.accuracy === null ? [] : [`accuracy: ${(summary.accuracy * 100).toFixed(1)}% over ${summary.scored} tasks with an expected answer`]),
    `cost: ${usd(summary.cost.totalUsd)} in all, ${usd(summary.cost.meanUsd)} mean, ${usd(summary.cost.p50Usd)} p50, ${usd(summary.cost.p95Usd)} p95`,
    `duration: ${ms(summary.durationMs.p50)} p50, ${ms(summary.durationMs.p95)} p95 · iterations: ${summary.iterations.total} (${summary.iterations.mean?.toFixed(1) ?? '-'} a task)`,
    ...Object.entries(summary.tokensByModel).map(([model, usage]) => `  ${model}: ${usage.calls} calls, ${formatTokens(usage.inputTokens)} in, ${formatTokens(usage.outputTokens)} out`),
    ...(summary.mostExpensive.length ? [`most expensive: ${summary.mostExpensive.map((task) => `${task.id} (${formatCost(task.costUsd, true)})`).join(', ')}`] : []),
    ...(summary.slowest.length ? [`slowest: ${summary.slowest.map((task) => `${task.id} (${ms(task.durationMs)})`).join(', ')}`] : []),
    `results: ${out}`,
  ];
  return `${lines.join('\n')}\n`;
}
