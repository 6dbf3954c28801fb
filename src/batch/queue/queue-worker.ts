import { hostname } from 'node:os';
import { UnrecoverableError, WaitingError, Worker, type Job } from 'bullmq';
import { RlmError } from '../../errors.js';
import { batchKeys } from './batch-record.js';
import { connectionOptions, KEY_PREFIX, type QueueAddress } from './queue-connection.js';
import { RedisSpendAccount } from './redis-spend-account.js';
import { taskLineOf } from './task-jobs.js';

/** What a job returns: the results-file line the coordinator writes, and its status for the counts. */
export interface TaskJobResult {
  status: 'completed' | 'failed';
  line: Record<string, unknown>;
}

/** One finished run of a task, as the worker's runner reports it. */
export interface TaskOutcome extends TaskJobResult {
  /** The failure may pass on another try (an upstream error after rlm's own retries). */
  retriable: boolean;
  /** Why it failed, for BullMQ's record of a try that is retried. */
  reason?: string;
}

/** Runs one task line (read against the worker's own --data-dir, with its own models and key). */
export type TaskRunner = (input: {
  taskId: string;
  line: string;
  /** The batch's budget, shared with every worker: the run's model calls charge it. */
  account: RedisSpendAccount;
  /** Aborted when the task is handed back (grace period over). */
  signal: AbortSignal;
  /** The try this is, from 1: the results line records it. */
  attempt: number;
}) => Promise<TaskOutcome>;

/** Builds the line of a task that never ran because the batch budget was spent. */
export type BudgetSpentLine = (input: { taskId: string; line: string; budgetUsd: number; spentUsd: number }) => TaskJobResult;

export type QueueWorkerEvent =
  | { type: 'task-start'; taskId: string; attempt: number }
  | { type: 'task-end'; taskId: string; status: 'completed' | 'failed' | 'retry' | 'handed-back'; attempt: number }
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
  budgetSpentLine: BudgetSpentLine;
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
  let account: RedisSpendAccount | undefined;
  const worker = new Worker(options.address.name, (job, token) => processJob({ job, token, account: account!, running, options }), {
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
  worker.on('error', (error) => options.onEvent?.({ type: 'error', message: error.message }));
  account = new RedisSpendAccount({ client: await worker.client, keys: batchKeys(options.address.name) });
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
      await account.settled();
    },
  };
}

/** Why a running task stopped: the worker is stopping and its grace period is over. */
class HandBack extends Error {
  override name = 'HandBack';
}

async function processJob({ job, token, account, running, options }: { job: Job; token: string | undefined; account: RedisSpendAccount; running: Map<string, AbortController>; options: QueueWorkerOptions }): Promise<TaskJobResult> {
  const { taskId, line } = readJob(job);
  await account.refresh();
  if (account.budgetUsd !== undefined && account.remaining() <= 0) {
    await account.settled();
    return options.budgetSpentLine({ taskId, line, budgetUsd: account.budgetUsd, spentUsd: account.budgetUsd - account.remaining() });
  }
  const attempt = job.attemptsStarted || 1;
  const controller = new AbortController();
  running.set(job.id!, controller);
  options.onEvent?.({ type: 'task-start', taskId, attempt });
  try {
    const outcome = await options.runTask({ taskId, line, account, signal: controller.signal, attempt });
    if (controller.signal.aborted) {
      // Handed back: the job waits for another worker, its tries left as they were.
      await job.moveToWait(token);
      options.onEvent?.({ type: 'task-end', taskId, status: 'handed-back', attempt });
      throw new WaitingError();
    }
    // BullMQ counts failed tries in attemptsMade (a try cut by a dead worker is not one of them).
    if (outcome.retriable && job.attemptsMade + 1 < (job.opts.attempts ?? 1)) {
      options.onEvent?.({ type: 'task-end', taskId, status: 'retry', attempt });
      throw new Error(outcome.reason ?? 'the task failed and may pass on another try');
    }
    options.onEvent?.({ type: 'task-end', taskId, status: outcome.status, attempt });
    // Costs reach Redis before the result counts as done, so status never shows a result without its spend.
    await account.settled();
    return { status: outcome.status, line: outcome.line };
  } finally {
    running.delete(job.id!);
  }
}

/** The task a job carries; a job this worker cannot read fails at once (another try reads the same bytes). */
function readJob(job: Job): { taskId: string; line: string } {
  try {
    return taskLineOf(job.data);
  } catch (error) {
    throw new UnrecoverableError(error instanceof RlmError ? error.message : `The job's task could not be read: ${(error as Error).message}`);
  }
}
