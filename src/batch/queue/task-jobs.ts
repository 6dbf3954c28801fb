import { gunzipSync, gzipSync } from 'node:zlib';
import { ConfigurationError } from '../../errors.js';
import { formatBytes } from '../../format.js';

/**
 * What a job carries: the task's line of the tasks file, gzip-compressed, as the worker reads it
 * again with its own --data-dir. Only the task crosses Redis: models, endpoint and key are the
 * worker's own.
 */
export interface TaskJobData {
  /** The shape of this object, so a worker of another version refuses a job instead of misreading it. */
  format: typeof JOB_FORMAT;
  taskId: string;
  /** The line, gzip-compressed, in base64 (BullMQ keeps job data as JSON text). */
  line: string;
  settings: BatchSettings;
}

/** The coordinator's batch flags a worker needs to run a task as `rlm batch` would. */
export interface BatchSettings {
  /** exact, contains, number, json, or a module path the workers can load (relative to their --data-dir). */
  scorer?: string;
  /** USD one task may spend (--task-budget). */
  taskBudgetUsd?: number;
  /** Runs of the task in earlier batches, from the results file: the result's `attempts` goes on from them. */
  previousAttempts?: number;
}

export const JOB_FORMAT = 'rlm-task-line/1';

/**
 * A job id for a task: BullMQ refuses ids with ':' and ids that are integers, so the task id is
 * percent-encoded (':' becomes %3A) behind a prefix. Readable in Redis and in dashboards, one id
 * per task id: adding a task twice adds one job. The batch name is in the queue's keys already.
 */
export function jobIdOf(taskId: string): string {
  return `task-${encodeURIComponent(taskId)}`;
}

/** The task id of a job id made by jobIdOf. */
export function taskIdOfJob(jobId: string): string {
  return decodeURIComponent(jobId.replace(/^task-/, ''));
}

/**
 * The job data of one task line; a line whose compressed size passes `maxBytes` is refused with
 * advice, before anything is queued (Redis holds every job in memory).
 */
export function taskJobData({ taskId, line, lineNumber, maxBytes, settings }: { taskId: string; line: string; lineNumber: number; maxBytes: number; settings: BatchSettings }): TaskJobData {
  const compressed = gzipSync(line);
  if (compressed.length > maxBytes) {
    throw new ConfigurationError(
      `Task "${taskId}" (line ${lineNumber}) is ${formatBytes(compressed.length)} compressed, over the queue's limit of ${formatBytes(maxBytes)} for a task that travels inline: ` +
        'put its context in a file the workers can read (context_path, relative to their --data-dir) or at an http(s) URL they fetch, or raise --max-inline-mb.',
    );
  }
  return { format: JOB_FORMAT, taskId, line: compressed.toString('base64'), settings };
}

/** The task line a job carries; a job of an unknown shape is refused (not retried: it will not change). */
export function taskLineOf(data: unknown): { taskId: string; line: string; settings: BatchSettings } {
  const job = data as Partial<TaskJobData> | null;
  if (job?.format !== JOB_FORMAT || typeof job.taskId !== 'string' || typeof job.line !== 'string') {
    throw new ConfigurationError(`The job is not a task of this rlm version (format ${JSON.stringify(job?.format)}, expected ${JOB_FORMAT}): run workers and the coordinator of one version.`);
  }
  return { taskId: job.taskId, line: gunzipSync(Buffer.from(job.line, 'base64')).toString('utf8'), settings: job.settings ?? {} };
}
