import { readFileSync } from 'node:fs';
import { Queue, type Job } from 'bullmq';
import { DEFAULTS } from '../../defaults.js';
import { RlmError } from '../../errors.js';
import { readResults, recordOf, ResultsFile, type ResultLine, type TaskRecord } from '../results.js';
import { failedRecord, lineOf, type BatchEvent, type BatchResult } from '../run-batch.js';
import { summarize } from '../summary.js';
import { readTasksFile, type BatchTask } from '../tasks.js';
import { batchKeys, readBudget, readUnfinishedRuns, recordCollected, recordCoordinatorStart, type BatchKeys, type UnfinishedRun } from './batch-record.js';
import { closeQueue, connectionOptions, KEY_PREFIX, reachable, type QueueAddress } from './queue-connection.js';
import type { TaskJobResult } from './queue-worker.js';
import { jobIdOf, taskIdOfJob, taskJobData, type BatchSettings, type TaskJobData } from './task-jobs.js';

export interface QueuedBatchOptions {
  address: QueueAddress;
  /** The tasks file; context paths in it are the workers' to read (against their --data-dir). */
  tasksPath: string;
  /** The results file: read at start (resume), appended as results come. */
  out: string;
  settings: Omit<BatchSettings, 'previousAttempts'>;
  /** USD for the whole batch, over every worker; kept in Redis. */
  maxBudgetUsd: number | undefined;
  retryFailed: boolean;
  /** Tries of a task whose failure may pass. */
  attempts: number;
  /** First wait before another try, doubled each time, in ms. */
  backoffMs: number;
  /** Largest compressed task line a job may carry. */
  maxInlineBytes: number;
  collectIntervalMs: number;
  /** Stops collecting; the jobs stay in Redis, and the next start collects them. */
  signal: AbortSignal;
  onEvent?: (event: BatchEvent) => void;
}

type Queued = Queue<TaskJobData, TaskJobResult>;

/**
 * `rlm batch --queue`: queues every task that is to run (as `rlm batch` decides: no completed line
 * yet, failed ones with retryFailed) and writes each result to the results file once. Jobs that
 * finished while no coordinator ran are collected first, so a coordinator started again re-attaches
 * to its batch. Resolves with the summary once every queued task has its line, the budget stopped
 * the batch, or the signal came.
 */
export async function runQueuedBatch(options: QueuedBatchOptions): Promise<BatchResult> {
  const tasks = readTasksFile(options.tasksPath, { checkPaths: false });
  const previous = readResults(options.out);
  // Every job is built (and a too-large one refused) before anything reaches Redis.
  const jobs = taskLines(options.tasksPath).map((line, index) => {
    const task = tasks[index]!;
    const settings = { ...options.settings, previousAttempts: previous.get(task.id)?.attempts ?? 0 };
    return taskJobData({ taskId: task.id, line: line.text, lineNumber: line.number, maxBytes: options.maxInlineBytes, settings });
  });
  const results = new ResultsFile(options.out);
  const queue: Queued = new Queue(options.address.name, { connection: connectionOptions(options.address.url), prefix: KEY_PREFIX });
  try {
    await reachable(queue, options.address.url, DEFAULTS.queue.connectTimeoutMs);
    const keys = batchKeys(options.address.name);
    const records = [...previous.values()];
    await recordCoordinatorStart(await queue.client, keys, {
      total: tasks.length,
      budgetUsd: options.maxBudgetUsd,
      completedIds: records.filter((record) => record.status === 'completed').map((record) => record.id),
      failedIds: records.filter((record) => record.status === 'failed').map((record) => record.id),
    });
    const collector = new ResultCollector({ queue, keys, tasks, previous, results, options });
    await collector.collect();
    const toRun = jobs.filter((job) => needsRun(previous.get(job.taskId), options.retryFailed));
    await enqueue(queue, toRun, options);
    const stoppedBy = await collector.until(new Set(toRun.map((job) => job.taskId)));
    return { ...summarize(tasks.flatMap((task) => previous.get(task.id) ?? []), tasks.length, new Set(tasks.filter((task) => task.hasExpected).map((task) => task.id))), stoppedBy };
  } finally {
    results.close();
    await closeQueue(queue);
  }
}

/** As `rlm batch` resumes: a completed task is done; a failed one runs again only when asked. */
function needsRun(previous: TaskRecord | undefined, retryFailed: boolean): boolean {
  return previous === undefined || (previous.status === 'failed' && retryFailed);
}

/** The non-blank lines of the tasks file, as readTasksFile takes them: the text a job carries. */
function taskLines(path: string): { text: string; number: number }[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .map((text, index) => ({ text, number: index + 1 }))
    .filter((line) => line.text.trim() !== '');
}

/** Adds the jobs in slices; a job id that is already queued (an earlier start) is left as it is. */
async function enqueue(queue: Queued, jobs: TaskJobData[], options: QueuedBatchOptions): Promise<void> {
  const jobOptions = { attempts: options.attempts, backoff: { type: 'exponential', delay: options.backoffMs }, removeOnComplete: false, removeOnFail: false };
  for (let start = 0; start < jobs.length && !options.signal.aborted; start += 500) {
    await queue.addBulk(jobs.slice(start, start + 500).map((data) => ({ name: 'task', data, opts: { ...jobOptions, jobId: jobIdOf(data.taskId) } })));
  }
}

interface CollectorParts {
  queue: Queued;
  keys: BatchKeys;
  tasks: BatchTask[];
  /** The last record per task id, updated as results are written. */
  previous: Map<string, TaskRecord>;
  results: ResultsFile;
  options: QueuedBatchOptions;
}

class ResultCollector {
  readonly #parts: CollectorParts;
  readonly #tasks: Map<string, BatchTask>;
  /** Jobs a worker gave back unstarted because the budget was spent. */
  #notStarted = 0;

  constructor(parts: CollectorParts) {
    this.#parts = parts;
    this.#tasks = new Map(parts.tasks.map((task) => [task.id, task]));
  }

  /** Collects until every task of `outstanding` has its line, the budget is spent and nothing runs, or the signal comes. */
  async until(outstanding: Set<string>): Promise<BatchResult['stoppedBy']> {
    const { signal, collectIntervalMs } = this.#parts.options;
    while (!signal.aborted) {
      for (const taskId of await this.collect()) outstanding.delete(taskId);
      if (outstanding.size === 0) return this.#notStarted > 0 ? 'budget' : null;
      if (await this.#budgetStopped()) {
        await this.#closeUnfinished(outstanding);
        return 'budget';
      }
      await sleep(collectIntervalMs, signal);
    }
    return 'signal';
  }

  /**
   * Once the budget is spent, the tasks still waiting will not start: they leave the queue (they
   * get no line, so a rerun with a larger budget runs them). The batch ends when no task runs.
   */
  async #budgetStopped(): Promise<boolean> {
    const { queue, keys, options } = this.#parts;
    if (options.maxBudgetUsd === undefined) return false;
    const { budgetUsd, spentUsd } = await readBudget(await queue.client, keys);
    if (budgetUsd === undefined || spentUsd < budgetUsd) return false;
    await queue.drain(true);
    const counts = await queue.getJobCounts('active', 'completed', 'failed');
    return (counts.active ?? 0) + (counts.completed ?? 0) + (counts.failed ?? 0) === 0;
  }

  /**
   * Once the budget stopped the batch and no task runs: a task a worker started whose result never
   * came (its try failed and the next was drained, or its worker died and the job went back to
   * wait) gets a failed line saying so, since it was paid for.
   */
  async #closeUnfinished(outstanding: Set<string>): Promise<void> {
    const { queue, keys } = this.#parts;
    const client = await queue.client;
    for (const [taskId, run] of await readUnfinishedRuns(client, keys, [...outstanding])) {
      this.#write(taskId, this.#budgetStoppedResult(taskId, run));
      await recordCollected(client, keys, { taskId, status: 'failed' });
    }
  }

  /** Writes the results of every finished job and removes the jobs; returns their task ids. */
  async collect(): Promise<string[]> {
    const collected: string[] = [];
    // By list, not by job fields: a job that failed a try and then passed keeps its failedReason.
    for (const state of ['completed', 'failed'] as const) {
      for (;;) {
        const jobs = await this.#parts.queue.getJobs([state], 0, 199, true);
        if (jobs.length === 0 || this.#parts.options.signal.aborted) break;
        for (const job of jobs) {
          if (this.#parts.options.signal.aborted) return collected;
          collected.push(await this.#collectOne(job, state));
        }
      }
    }
    return collected;
  }

  /**
   * Write, count, then remove: a coordinator killed between the write and the removal finds the
   * job again at its next start, sees the same record already last in the file, and only removes it.
   */
  async #collectOne(job: Job<TaskJobData, TaskJobResult>, state: 'completed' | 'failed'): Promise<string> {
    const { queue, keys } = this.#parts;
    const taskId = job.data?.taskId ?? taskIdOfJob(job.id!);
    let result = state === 'completed' && job.returnvalue ? job.returnvalue : this.#failedJobResult(job, taskId);
    if (result.status === 'not-started') {
      // Not started now, but maybe before: a try whose worker died, or one that failed and was due again.
      const run = (await readUnfinishedRuns(await queue.client, keys, [taskId])).get(taskId);
      if (run) result = this.#budgetStoppedResult(taskId, run);
    }
    if (result.status !== 'not-started') {
      this.#write(taskId, result);
      await recordCollected(await queue.client, keys, { taskId, status: result.status });
    } else {
      this.#notStarted++;
    }
    await job.remove();
    return taskId;
  }

  /** Appends a task's line, unless the file already ends its record with the same one (a restarted coordinator collecting again). */
  #write(taskId: string, result: Exclude<TaskJobResult, { status: 'not-started' }>): void {
    const { previous, results, options } = this.#parts;
    const record = recordOf(result.line as unknown as ResultLine);
    if (JSON.stringify(previous.get(taskId)) === JSON.stringify(record)) return;
    results.append(result.line as unknown as ResultLine);
    previous.set(taskId, record);
    options.onEvent?.({ type: 'task-end', record });
  }

  /** The line of a task that started but did not finish before the budget was spent. */
  #budgetStoppedResult(taskId: string, run: UnfinishedRun): Exclude<TaskJobResult, { status: 'not-started' }> {
    const why = run.failure
      ? `Try ${run.attempt} failed (${run.failure}), and the batch budget was spent before another try.`
      : `Try ${run.attempt} started, but its worker stopped before it finished (killed, cut off from Redis, or stopped), and the batch budget was spent before another try.`;
    return this.#failedLine(taskId, new RlmError('max_budget', why), run.attempt, 0);
  }

  /** The line of a job BullMQ gave up on: its worker died too often, or it could not read the task. */
  #failedJobResult(job: Job<TaskJobData, TaskJobResult>, taskId: string): TaskJobResult {
    const error = new RlmError('job_failed', job.failedReason || 'the job failed without a reason');
    const attempts = (job.data?.settings?.previousAttempts ?? 0) + Math.max(1, job.attemptsStarted);
    return this.#failedLine(taskId, error, attempts, job.finishedOn && job.processedOn ? job.finishedOn - job.processedOn : 0);
  }

  #failedLine(taskId: string, error: RlmError, attempts: number, durationMs: number): Exclude<TaskJobResult, { status: 'not-started' }> {
    const task = this.#tasks.get(taskId);
    if (!task) return { status: 'failed', line: { id: taskId, status: 'failed', error: { code: error.code, message: error.message }, attempts } };
    const record = failedRecord(task, error, { attempts, iterations: 0, durationMs });
    return { status: 'failed', line: lineOf(task, record, error) as unknown as Record<string, unknown> };
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });
}
