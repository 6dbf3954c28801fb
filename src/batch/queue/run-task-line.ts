import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { DEFAULTS } from '../../defaults.js';
import type { SpendAccount } from '../../engine/spend-account.js';
import { ModelScheduler } from '../../lm/scheduler.js';
import { ConfigurationError, ModelError, RlmError } from '../../errors.js';
import { mayPassOnRetry } from '../failures.js';
import type { ResultLine } from '../results.js';
import { runBatch, type RunBatchOptions } from '../run-batch.js';
import type { Scorer } from '../scorers.js';
import type { TaskOutcome } from './queue-worker.js';


/** What a worker runs every task with: its own models, endpoint, key, run flags and --data-dir. */
export type WorkerRunOptions = Omit<RunBatchOptions, 'tasks' | 'out' | 'concurrency' | 'signal' | 'onResult' | 'onLine' | 'onEvent' | 'maxBudgetUsd' | 'spendAccount' | 'retryFailed'>;

type TaskLineInput = Parameters<typeof runTaskLine>[0];

/**
 * The runner of a worker's jobs: every task on one request queue per model, so --max-concurrency
 * and a server's retry-after hold for all of the worker's tasks, as for the tasks of `rlm batch`.
 * `taskBudgetUsd` is each job's own (the coordinator's --task-budget).
 */
export function workerTaskRunner(options: Omit<WorkerRunOptions, 'scheduler'>) {
  const scheduler = new ModelScheduler(options.maxConcurrency ?? DEFAULTS.lm.maxConcurrency);
  return ({ taskBudgetUsd, ...input }: Omit<TaskLineInput, 'options'> & { taskBudgetUsd?: number | undefined }) =>
    runTaskLine({ ...input, options: { ...options, scheduler, ...(taskBudgetUsd !== undefined && { taskBudgetUsd }) } });
}

/**
 * Runs one task line as a batch of one, so a worker reads, runs, scores and shapes a task exactly
 * as `rlm batch` does. Resolves to undefined when the task did not start (the shared budget was
 * spent first, or the signal came). Paths of the line are read against `options.dataDir`; http(s)
 * URLs among them are fetched first.
 */
export async function runTaskLine({ line, options, scorer, account, attempts, signal }: { line: string; options: WorkerRunOptions; scorer: Scorer | undefined; account: SpendAccount | undefined; attempts: number; signal: AbortSignal }): Promise<TaskOutcome | undefined> {
  const task = JSON.parse(line) as Record<string, unknown>;
  const downloads = mkdtempSync(join(tmpdir(), 'rlm-task-'));
  try {
    await fetchUrlPaths(task, downloads, signal);
    let finished: { line: ResultLine; failure: unknown } | undefined;
    await runBatch({
      ...options,
      ...(scorer && { scorer }),
      tasks: [task as never],
      concurrency: 1,
      // The queue tries a failed task again (on any worker, after a backoff): not this run.
      attempts: 1,
      signal,
      ...(account && { spendAccount: account }),
      onLine: (resultLine, failure) => (finished = { line: resultLine, failure }),
    });
    if (!finished) return undefined;
    const record = 'custom_id' in finished.line ? finished.line.rlm : finished.line;
    record.attempts = attempts;
    return { status: record.status, line: finished.line as unknown as Record<string, unknown>, retriable: mayPassOnRetry(finished.failure), ...(record.error && { reason: record.error.message }) };
  } finally {
    rmSync(downloads, { recursive: true, force: true });
  }
}

/** Replaces http(s) URLs among the line's context paths with files fetched into `folder` (named as in the URL, so the extension still picks the format). */
async function fetchUrlPaths(task: Record<string, unknown>, folder: string, signal: AbortSignal): Promise<void> {
  const fetchOne = async (path: unknown, index: number) => {
    if (typeof path !== 'string' || !/^https?:\/\//i.test(path)) return path;
    const response = await fetch(path, { signal }).catch((error: unknown) => {
      throw new ModelError(`Fetching the context ${path} failed: ${(error as Error).message}.`, undefined, { retriable: true, cause: error });
    });
    if (!response.ok) {
      const message = `Fetching the context ${path} failed: HTTP ${response.status}.`;
      if (response.status >= 500 || response.status === 429) throw new ModelError(message, response.status, { retriable: true });
      throw new ConfigurationError(message);
    }
    const file = join(folder, `${index}-${basename(new URL(path).pathname) || 'context.txt'}`);
    writeFileSync(file, Buffer.from(await response.arrayBuffer()));
    return file;
  };
  if (task.context_path !== undefined) task.context_path = await fetchOne(task.context_path, 0);
  if (Array.isArray(task.context_paths)) task.context_paths = await Promise.all(task.context_paths.map(fetchOne));
}
