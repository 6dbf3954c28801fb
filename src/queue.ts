// Batches over many machines, on BullMQ and Redis: `import { runQueuedBatch, startQueueWorker } from 'rlm/queue'`.
// An entry of its own, so programs (and `rlm` commands) that do not use a queue never load BullMQ.
export { runQueuedBatch } from './batch/queue/coordinator.js';
export type { QueuedBatchOptions } from './batch/queue/coordinator.js';
export { startQueueWorker } from './batch/queue/queue-worker.js';
export type { QueueWorkerEvent, QueueWorkerOptions, RunningQueueWorker, TaskJobResult, TaskOutcome, TaskRunner } from './batch/queue/queue-worker.js';
export { runTaskLine, workerTaskRunner } from './batch/queue/run-task-line.js';
export type { WorkerRunOptions } from './batch/queue/run-task-line.js';
export { readBatchStatus } from './batch/queue/batch-status.js';
export type { BatchStatus } from './batch/queue/batch-status.js';
export { RedisSpendAccount } from './batch/queue/redis-spend-account.js';
export { checkBatchName, connectionOptions, displayUrl } from './batch/queue/queue-connection.js';
export type { QueueAddress } from './batch/queue/queue-connection.js';
export type { BatchSettings } from './batch/queue/task-jobs.js';
