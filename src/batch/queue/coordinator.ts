import { Queue, type Job } from 'bullmq';
import { batchKeys, recordCollected, recordCoordinatorStart, type BatchKeys } from './batch-record.js';
import { connectionOptions, KEY_PREFIX, type QueueAddress } from './queue-connection.js';
import type { TaskJobResult } from './queue-worker.js';
import { jobIdOf, taskIdOfJob, taskJobData, type TaskJobData } from './task-jobs.js';

/** A task of the tasks file, as it travels: its id, its line, where it was. */
export interface QueuedTask {
  taskId: string;
  line: string;
  lineNumber: number;
}

/** The last line the results file holds for a task. */
export interface WrittenResult {
  status: 'completed' | 'failed';
  line: Record<string, unknown>;
}

export interface CoordinatorOptions {
  address: QueueAddress;
  /** Every task of the tasks file. */
  tasks: QueuedTask[];
  /** The results file as read at start: the last line per task id. Updated as results are written. */
  written: Map<string, WrittenResult>;
  /** Whether a task with this last result (undefined: none) is to be run. */
  needsRun: (written: WrittenResult | undefined) => boolean;
  /** Appends one line to the results file and flushes it. */
  appendLine: (line: Record<string, unknown>) => Promise<void>;
  /** The line of a job BullMQ gave up on (its worker died too often, its data unreadable). */
  failedJobLine: (input: { taskId: string; reason: string; attempts: number }) => Record<string, unknown>;
  attempts: number;
  backoffMs: number;
  maxInlineBytes: number;
  budgetUsd: number | undefined;
  collectIntervalMs: number;
  signal: AbortSignal;
  onResult?: (result: TaskJobResult & { taskId: string }) => void;
}

/**
 * `rlm batch --queue`: queues every task that is to run and writes each result to the results file
 * once. Results of jobs that finished while no coordinator ran are collected first, so a restarted
 * coordinator re-attaches to its batch. Resolves when every queued task has its line, or when
 * `signal` is aborted (the jobs stay in Redis for the next start).
 */
export async function runCoordinator(options: CoordinatorOptions): Promise<void> {
  // Every job is built (and a too-large one refused) before anything reaches Redis.
  const jobData = new Map(options.tasks.map((task) => [task.taskId, taskJobData({ ...task, maxBytes: options.maxInlineBytes })]));
  const queue = new Queue<TaskJobData, TaskJobResult>(options.address.name, { connection: connectionOptions(options.address.url), prefix: KEY_PREFIX });
  try {
    const client = await queue.client;
    const keys = batchKeys(options.address.name);
    const written = [...options.written];
    await recordCoordinatorStart(client, keys, {
      total: options.tasks.length,
      budgetUsd: options.budgetUsd,
      completedIds: written.filter(([, result]) => result.status === 'completed').map(([taskId]) => taskId),
      failedIds: written.filter(([, result]) => result.status === 'failed').map(([taskId]) => taskId),
    });
    const collector = new ResultCollector({ queue, keys, options });
    await collector.collect();
    const toRun = options.tasks.filter((task) => options.needsRun(options.written.get(task.taskId)));
    await enqueue(queue, toRun.map((task) => jobData.get(task.taskId)!), options);
    await collector.until(new Set(toRun.map((task) => task.taskId)));
  } finally {
    await queue.close();
  }
}

/** Adds the jobs in slices; a job id that is already queued (an earlier start) is left as it is. */
async function enqueue(queue: Queue<TaskJobData, TaskJobResult>, jobs: TaskJobData[], options: CoordinatorOptions): Promise<void> {
  const jobOptions = { attempts: options.attempts, backoff: { type: 'exponential', delay: options.backoffMs }, removeOnComplete: false, removeOnFail: false };
  for (let start = 0; start < jobs.length && !options.signal.aborted; start += 500) {
    await queue.addBulk(jobs.slice(start, start + 500).map((data) => ({ name: 'task', data, opts: { ...jobOptions, jobId: jobIdOf(data.taskId) } })));
  }
}

class ResultCollector {
  readonly #queue: Queue<TaskJobData, TaskJobResult>;
  readonly #keys: BatchKeys;
  readonly #options: CoordinatorOptions;

  constructor({ queue, keys, options }: { queue: Queue<TaskJobData, TaskJobResult>; keys: BatchKeys; options: CoordinatorOptions }) {
    this.#queue = queue;
    this.#keys = keys;
    this.#options = options;
  }

  /** Collects until every task of `outstanding` has its line, or the signal stops it. */
  async until(outstanding: Set<string>): Promise<void> {
    const { signal, collectIntervalMs } = this.#options;
    while (!signal.aborted) {
      for (const taskId of await this.collect()) outstanding.delete(taskId);
      if (outstanding.size === 0) return;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, collectIntervalMs);
        signal.addEventListener('abort', done, { once: true });
        function done() {
          clearTimeout(timer);
          signal.removeEventListener('abort', done);
          resolve();
        }
      });
    }
  }

  /** Writes the results of every finished job and removes the jobs; returns their task ids. */
  async collect(): Promise<string[]> {
    const collected: string[] = [];
    // By list, not by job fields: a job that failed a try and then passed keeps its failedReason.
    for (const state of ['completed', 'failed'] as const) {
      for (;;) {
        const jobs = await this.#queue.getJobs([state], 0, 199, true);
        if (jobs.length === 0 || this.#options.signal.aborted) break;
        for (const job of jobs) {
          if (this.#options.signal.aborted) return collected;
          collected.push(await this.#collectOne(job, state));
        }
      }
    }
    return collected;
  }

  /**
   * Write, count, then remove: a coordinator killed between the write and the removal finds the
   * job again at its next start, sees the same line already last in the file, and only removes it.
   */
  async #collectOne(job: Job<TaskJobData, TaskJobResult>, state: 'completed' | 'failed'): Promise<string> {
    const taskId = job.data?.taskId ?? taskIdOfJob(job.id!);
    const result = state === 'completed' && job.returnvalue?.line ? job.returnvalue : this.#failedJobResult(job, taskId);
    const last = this.#options.written.get(taskId);
    if (last === undefined || JSON.stringify(last.line) !== JSON.stringify(result.line)) {
      await this.#options.appendLine(result.line);
      this.#options.written.set(taskId, result);
      this.#options.onResult?.({ ...result, taskId });
    }
    await recordCollected(await this.#queue.client, this.#keys, { taskId, status: result.status });
    await job.remove();
    return taskId;
  }

  #failedJobResult(job: Job<TaskJobData, TaskJobResult>, taskId: string): TaskJobResult {
    const reason = job.failedReason || 'the job failed without a reason';
    return { status: 'failed', line: this.#options.failedJobLine({ taskId, reason, attempts: Math.max(job.attemptsStarted, job.attemptsMade, 1) }) };
  }
}
