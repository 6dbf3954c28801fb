import { hostname } from 'node:os';
import { UnrecoverableError, WaitingError, Worker, type Job } from 'bullmq';
import { DEFAULTS } from '../../defaults.js';
import type { SpendAccount } from '../../engine/spend-account.js';
import { ConfigurationError, RlmError } from '../../errors.js';
import { batchKeys, forgetRun, recordRun, type UnfinishedRun } from './batch-record.js';
import { closeQueue, connectionOptions, KEY_PREFIX, reachable, type QueueAddress } from './queue-connection.js';
import { RedisSpendAccount } from './redis-spend-account.js';
import { taskLineOf, type BatchSettings, type TaskJobData } from './task-jobs.js';

/**
 * What a job returns: the results-file line the coordinator writes and its status for the counts,
 * or `not-started` for a task the worker did not start because the batch's budget was spent (it
 * gets no line, as in `rlm batch`, so a rerun with a larger budget runs it).
 */
export type TaskJobResult = { status: 'completed' | 'failed'; line: Record<string, unknown> } | { status: 'not-started' };

/** One finished run of a task, as the worker's runner reports it. */
export type TaskOutcome = { status: 'completed' | 'failed'; line: Record<string, unknown>; retriable: boolean; reason?: string };

/** Runs one task line (read against the worker's own --data-dir, with its own models and key). */
export type TaskRunner = (input: {
  taskId: string;
  line: string;
  /** The batch's settings the job carries (scorer, task budget). */
  settings: BatchSettings;
  /** The batch's budget, shared with every worker; undefined when the batch has none. */
  account: SpendAccount | undefined;
  /** Aborted when the task is handed back (grace period over). */
  signal: AbortSignal;
  /** Runs of this task so far, this one included (earlier batches' too). */
  attempts: number;
}) => Promise<TaskOutcome | undefined>;

export type QueueWorkerEvent =
  | { type: 'task-start'; taskId: string; attempt: number }
  | { type: 'task-end'; taskId: string; status: 'completed' | 'failed' | 'retry' | 'handed-back' | 'not-started'; attempt: number }
  | { type: 'error'; message: string };

export interface QueueWorkerOptions {
  address: QueueAddress;
  /** Tasks run at once by this worker. */
  concurrency: number;
  /** After `stop()`, how long running tasks may take before they are handed back, in ms. */
  graceMs: number;
  lockDurationMs: number;
  stalledIntervalMs: number;
  runTask: TaskRunner;
  onEvent?: (event: QueueWorkerEvent) => void;
}

export interface RunningQueueWorker {
  /** No new tasks; running ones get the grace period, then go back to the queue. Resolves once closed. */
  stop(): Promise<void>;
  /** Resolves when the worker has closed (after stop, or when it could not go on). */
  closed: Promise<void>;
}

/**
 * Starts an `rlm worker`: takes the batch's jobs from Redis, `concurrency` at a time, and runs each
 * with the worker's own runner. BullMQ keeps a lock on each running job; when this process dies
 * the lock lapses and another worker's stalled-job check puts the job back in the queue.
 */
export async function startQueueWorker(options: QueueWorkerOptions): Promise<RunningQueueWorker> {
  const running = new Map<string, AbortController>();
  let batch: BatchParts | undefined;
  const worker = new Worker(options.address.name, (job, token) => processJob({ job, token, batch: batch!, running, options }), {
    connection: connectionOptions(options.address.url),
    prefix: KEY_PREFIX,
    concurrency: options.concurrency,
    lockDuration: options.lockDurationMs,
    stalledInterval: options.stalledIntervalMs,
    // A job whose worker died twice is more likely killing its workers than unlucky.
    maxStalledCount: 2,
    name: `${hostname()}:${process.pid}`,
    autorun: false,
  });
  try {
    await reachable(worker, options.address.url, DEFAULTS.queue.connectTimeoutMs);
  } catch (error) {
    await closeQueue({ close: () => worker.close(true), disconnect: () => worker.disconnect() });
    throw error;
  }
  worker.on('error', (error) => options.onEvent?.({ type: 'error', message: error.message }));
  const client = await worker.client;
  const keys = batchKeys(options.address.name);
  batch = {
    account: new RedisSpendAccount({ client, keys }),
    noteRun: (taskId, run) => recordRun(client, keys, taskId, run),
    forgetRun: (taskId) => forgetRun(client, keys, taskId),
  };
  const closed = new Promise<void>((resolve) => worker.once('closed', () => resolve()));
  void worker.run().catch((error: unknown) => options.onEvent?.({ type: 'error', message: (error as Error).message }));
  await worker.waitUntilReady();
  return {
    closed,
    stop: async () => {
      const grace = setTimeout(() => {
        for (const controller of running.values()) controller.abort(new HandBack());
      }, options.graceMs);
      await worker.close();
      clearTimeout(grace);
    },
  };
}

/** Why a running task stopped: the worker is stopping and its grace period is over. */
class HandBack extends RlmError {
  override name = 'HandBack';
  constructor() {
    super('handed_back', 'The worker is stopping and its grace period is over: the task goes back to the queue for another worker.');
  }
}

/** The batch's parts in Redis a worker's jobs use. */
interface BatchParts {
  account: RedisSpendAccount;
  /** Records a started try (and why it failed, when another is due) until its result is collected. */
  noteRun: (taskId: string, run: UnfinishedRun) => Promise<void>;
  forgetRun: (taskId: string) => Promise<void>;
}

async function processJob({ job, token, batch, running, options }: { job: Job<TaskJobData>; token: string | undefined; batch: BatchParts; running: Map<string, AbortController>; options: QueueWorkerOptions }): Promise<TaskJobResult> {
  const { taskId, line, settings } = readJob(job);
  const { account } = batch;
  const attempt = (settings.previousAttempts ?? 0) + Math.max(1, job.attemptsStarted);
  const remaining = await account.remaining();
  if (remaining <= 0) return notStarted(taskId, attempt, options);
  await batch.noteRun(taskId, { attempt });
  const controller = new AbortController();
  running.set(job.id!, controller);
  options.onEvent?.({ type: 'task-start', taskId, attempt });
  try {
    const shared = Number.isFinite(remaining) ? account : undefined;
    const outcome = await options.runTask({ taskId, line, settings, account: shared, signal: controller.signal, attempts: attempt }).catch((error: unknown) => {
      // A task this worker cannot read (a path missing under its --data-dir) fails at once.
      if (error instanceof ConfigurationError) throw new UnrecoverableError(error.message);
      throw error;
    });
    if (controller.signal.aborted) {
      // Handed back: the job waits for another worker, its tries left as they were.
      await job.moveToWait(token);
      options.onEvent?.({ type: 'task-end', taskId, status: 'handed-back', attempt });
      throw new WaitingError();
    }
    if (outcome === undefined) {
      // The budget was spent between this check and the run's own: nothing ran, nothing to report.
      await batch.forgetRun(taskId);
      return notStarted(taskId, attempt, options);
    }
    // BullMQ counts failed tries in attemptsMade (a try cut by a dead worker is not one of them).
    if (outcome.retriable && job.attemptsMade + 1 < (job.opts.attempts ?? 1)) {
      const reason = outcome.reason ?? 'the task failed and may pass on another try';
      await batch.noteRun(taskId, { attempt, failure: reason });
      options.onEvent?.({ type: 'task-end', taskId, status: 'retry', attempt });
      throw new Error(reason);
    }
    options.onEvent?.({ type: 'task-end', taskId, status: outcome.status, attempt });
    return { status: outcome.status, line: outcome.line };
  } finally {
    running.delete(job.id!);
  }
}

function notStarted(taskId: string, attempt: number, options: QueueWorkerOptions): TaskJobResult {
  options.onEvent?.({ type: 'task-end', taskId, status: 'not-started', attempt });
  return { status: 'not-started' };
}

/** The task a job carries; a job this worker cannot read fails at once (another try reads the same bytes). */
function readJob(job: Job<TaskJobData>): ReturnType<typeof taskLineOf> {
  try {
    return taskLineOf(job.data);
  } catch (error) {
    throw new UnrecoverableError(error instanceof RlmError ? error.message : `The job's task could not be read: ${(error as Error).message}`);
  }
}
