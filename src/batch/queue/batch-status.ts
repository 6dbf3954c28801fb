import { Queue } from 'bullmq';
import { batchKeys, readRecord } from './batch-record.js';
import { DEFAULTS } from '../../defaults.js';
import { closeQueue, connectionOptions, KEY_PREFIX, reachable, type QueueAddress } from './queue-connection.js';

/** Results counted for throughput: the last minute's (or since the batch started, when sooner). */
const THROUGHPUT_WINDOW_MS = 60_000;

/** A batch as Redis sees it, for `rlm batch status`. */
export interface BatchStatus {
  name: string;
  /** Tasks in the tasks file of the last coordinator start. */
  total: number;
  /** Jobs waiting for a worker (retries waiting out their backoff among them). */
  waiting: number;
  active: number;
  /** Results written to the results file. */
  completed: number;
  failed: number;
  /** Jobs finished whose results the coordinator has not written yet (none runs, or it is catching up). */
  uncollected: number;
  /** Worker processes connected now, by name (host:pid). */
  workers: string[];
  spentUsd: number;
  budgetUsd: number | null;
  /** Results per minute, over the last minute. */
  tasksPerMinute: number;
  /** Seconds until every task has a result at that pace; null when nothing finished lately. */
  etaSeconds: number | null;
}

export async function readBatchStatus(address: QueueAddress): Promise<BatchStatus> {
  const queue = new Queue(address.name, { connection: connectionOptions(address.url), prefix: KEY_PREFIX });
  try {
    await reachable(queue, address.url, DEFAULTS.queue.connectTimeoutMs);
    const client = await queue.client;
    const [counts, record, workers] = await Promise.all([
      queue.getJobCounts('waiting', 'prioritized', 'delayed', 'active', 'completed', 'failed'),
      readRecord(client, batchKeys(address.name), THROUGHPUT_WINDOW_MS),
      queue.getWorkers(),
    ]);
    const sinceStart = record.startedAt === undefined ? THROUGHPUT_WINDOW_MS : Date.now() - record.startedAt;
    const tasksPerMinute = (record.recent / Math.max(1_000, Math.min(THROUGHPUT_WINDOW_MS, sinceStart))) * 60_000;
    const left = Math.max(0, record.total - record.completed - record.failed);
    return {
      name: address.name,
      total: record.total,
      waiting: (counts.waiting ?? 0) + (counts.prioritized ?? 0) + (counts.delayed ?? 0),
      active: counts.active ?? 0,
      completed: record.completed,
      failed: record.failed,
      uncollected: (counts.completed ?? 0) + (counts.failed ?? 0),
      workers: workerNames(workers),
      spentUsd: record.budget.spentUsd,
      budgetUsd: record.budget.budgetUsd ?? null,
      tasksPerMinute,
      etaSeconds: left === 0 ? 0 : tasksPerMinute > 0 ? Math.round((left / tasksPerMinute) * 60) : null,
    };
  } finally {
    await closeQueue(queue);
  }
}

/** One name per worker process (host:pid): BullMQ names a worker's connection PREFIX:QUEUE:w:NAME. */
function workerNames(clients: { [key: string]: string }[]): string[] {
  const names = clients.map((client) => client.rawname ?? '').filter((name) => name.includes(':w:')).map((name) => name.slice(name.indexOf(':w:') + 3));
  return [...new Set(names)].sort();
}
