import type { RedisClient } from 'bullmq';
import { KEY_PREFIX } from './queue-connection.js';

/**
 * What a batch keeps in Redis beside BullMQ's own keys, all under rlm:NAME: (BullMQ's key types are
 * single words, so these names cannot meet them):
 * - `batch-info`, a hash: `total` tasks queued by the last coordinator start, `started_at` (ms),
 *   `budget_usd` (absent: no budget) and `spent_usd`, which every worker's runs charge;
 * - `collected-completed` / `collected-failed`, sets of the task ids the coordinator wrote to its
 *   results file (sets, so writing a result again after a crash counts it once);
 * - `finished-at`, a sorted set of those ids by the time they were collected, for throughput;
 * - `unfinished-runs`, a hash of the tasks a worker started whose result is not collected yet: the
 *   try it started and, once a try failed and another is due, why. When the budget stops the batch,
 *   a task found here that no worker still runs gets a failed line, so no paid-for run goes unsaid.
 */
export function batchKeys(name: string) {
  const base = `${KEY_PREFIX}:${name}:`;
  return {
    info: `${base}batch-info`,
    completed: `${base}collected-completed`,
    failed: `${base}collected-failed`,
    finishedAt: `${base}finished-at`,
    unfinished: `${base}unfinished-runs`,
  };
}

export type BatchKeys = ReturnType<typeof batchKeys>;

/** A batch's budget as Redis holds it. */
export interface BudgetState {
  budgetUsd: number | undefined;
  spentUsd: number;
}

// BullMQ's client interface spans several Redis clients and has few commands; scripts run on all
// of them, and each is atomic, so many machines never see a record half written.
const SCRIPTS = {
  rlmChargeBatch: { numberOfKeys: 1, lua: "return redis.call('HINCRBYFLOAT', KEYS[1], 'spent_usd', ARGV[1])" },
  rlmReadBudget: { numberOfKeys: 1, lua: "return redis.call('HMGET', KEYS[1], 'budget_usd', 'spent_usd')" },
  rlmRecordStart: {
    numberOfKeys: 3,
    lua: `redis.call('HSET', KEYS[1], 'total', ARGV[1])
redis.call('HSETNX', KEYS[1], 'started_at', ARGV[2])
if ARGV[3] == '' then redis.call('HDEL', KEYS[1], 'budget_usd') else redis.call('HSET', KEYS[1], 'budget_usd', ARGV[3]) end
redis.call('DEL', KEYS[2], KEYS[3])
local completed = tonumber(ARGV[4])
for index = 5, #ARGV do
  if index - 4 <= completed then redis.call('SADD', KEYS[2], ARGV[index]) else redis.call('SADD', KEYS[3], ARGV[index]) end
end
return 1`,
  },
  rlmRecordCollected: {
    numberOfKeys: 4,
    lua: `if ARGV[2] == 'completed' then redis.call('SADD', KEYS[1], ARGV[1]); redis.call('SREM', KEYS[2], ARGV[1])
else redis.call('SADD', KEYS[2], ARGV[1]); redis.call('SREM', KEYS[1], ARGV[1]) end
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
return 1`,
  },
  rlmRecordRun: { numberOfKeys: 1, lua: "return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])" },
  rlmForgetRun: { numberOfKeys: 1, lua: "return redis.call('HDEL', KEYS[1], ARGV[1])" },
  rlmReadRuns: { numberOfKeys: 1, lua: "return redis.call('HMGET', KEYS[1], unpack(ARGV))" },
  rlmReadRecord: {
    numberOfKeys: 4,
    lua: `local info = redis.call('HMGET', KEYS[1], 'total', 'started_at', 'budget_usd', 'spent_usd')
return { info[1] or false, info[2] or false, info[3] or false, info[4] or false, redis.call('SCARD', KEYS[2]), redis.call('SCARD', KEYS[3]),
  redis.call('ZCOUNT', KEYS[4], tonumber(ARGV[1]) - tonumber(ARGV[2]), ARGV[1]) }`,
  },
} as const;

const prepared = new WeakSet<RedisClient>();

function runScript(client: RedisClient, script: keyof typeof SCRIPTS, args: (string | number)[]): Promise<unknown> {
  if (!prepared.has(client)) {
    for (const [name, definition] of Object.entries(SCRIPTS)) client.defineCommand(name, definition);
    prepared.add(client);
  }
  return client.runCommand(script, args);
}

const numberOrUndefined = (value: unknown) => (value === null || value === false || value === undefined ? undefined : Number(value));

export async function readBudget(client: RedisClient, keys: BatchKeys): Promise<BudgetState> {
  const [budget, spent] = (await runScript(client, 'rlmReadBudget', [keys.info])) as unknown[];
  return { budgetUsd: numberOrUndefined(budget), spentUsd: numberOrUndefined(spent) ?? 0 };
}

/**
 * Charges a cost to the batch and returns what it has spent in all, from every worker: one
 * HINCRBYFLOAT, atomic in Redis, so concurrent charges from many machines all count.
 */
export async function chargeBatch(client: RedisClient, keys: BatchKeys, usd: number): Promise<number> {
  return Number(await runScript(client, 'rlmChargeBatch', [keys.info, usd]));
}

/**
 * Records the start of a coordinator: the batch's size and budget (a new budget replaces the old:
 * the user raised or lowered it on purpose), the start time of the batch's first start, and the
 * results its file holds, so the counts follow the file even when it was moved or cut by hand.
 */
export async function recordCoordinatorStart(
  client: RedisClient,
  keys: BatchKeys,
  { total, budgetUsd, completedIds, failedIds }: { total: number; budgetUsd: number | undefined; completedIds: string[]; failedIds: string[] },
): Promise<void> {
  const args = [keys.info, keys.completed, keys.failed, total, Date.now(), budgetUsd ?? '', completedIds.length, ...completedIds, ...failedIds];
  await runScript(client, 'rlmRecordStart', args);
}

/** Counts a result the coordinator wrote; idempotent, so a coordinator that crashed and writes again counts it once. */
export async function recordCollected(client: RedisClient, keys: BatchKeys, { taskId, status }: { taskId: string; status: 'completed' | 'failed' }): Promise<void> {
  await runScript(client, 'rlmRecordCollected', [keys.completed, keys.failed, keys.finishedAt, keys.unfinished, taskId, status, Date.now()]);
}

/** A task's run that a worker started and whose result is not collected yet. */
export interface UnfinishedRun {
  /** The try that started (earlier batches' runs counted). */
  attempt: number;
  /** Why the last try failed, when another was due. */
  failure?: string;
}

/** Notes that a worker started a try of a task, or that the try failed and another is due. */
export async function recordRun(client: RedisClient, keys: BatchKeys, taskId: string, run: UnfinishedRun): Promise<void> {
  await runScript(client, 'rlmRecordRun', [keys.unfinished, taskId, JSON.stringify(run)]);
}

/** Takes back the note of a try that did not start after all (the budget was spent meanwhile). */
export async function forgetRun(client: RedisClient, keys: BatchKeys, taskId: string): Promise<void> {
  await runScript(client, 'rlmForgetRun', [keys.unfinished, taskId]);
}

/** The unfinished runs of these tasks, by task id (tasks no worker started are absent). */
export async function readUnfinishedRuns(client: RedisClient, keys: BatchKeys, taskIds: string[]): Promise<Map<string, UnfinishedRun>> {
  const runs = new Map<string, UnfinishedRun>();
  for (let start = 0; start < taskIds.length; start += 1_000) {
    const slice = taskIds.slice(start, start + 1_000);
    const values = (await runScript(client, 'rlmReadRuns', [keys.unfinished, ...slice])) as (string | null)[];
    values.forEach((value, index) => value && runs.set(slice[index]!, JSON.parse(value) as UnfinishedRun));
  }
  return runs;
}

/** The figures `rlm batch status` reads from the record. */
export interface RecordFigures {
  total: number;
  startedAt: number | undefined;
  completed: number;
  failed: number;
  /** Results collected in the last `windowMs`. */
  recent: number;
  budget: BudgetState;
}

export async function readRecord(client: RedisClient, keys: BatchKeys, windowMs: number): Promise<RecordFigures> {
  const [total, startedAt, budget, spent, completed, failed, recent] = (await runScript(client, 'rlmReadRecord', [keys.info, keys.completed, keys.failed, keys.finishedAt, Date.now(), windowMs])) as unknown[];
  return {
    total: numberOrUndefined(total) ?? 0,
    startedAt: numberOrUndefined(startedAt),
    completed: Number(completed),
    failed: Number(failed),
    recent: Number(recent),
    budget: { budgetUsd: numberOrUndefined(budget), spentUsd: numberOrUndefined(spent) ?? 0 },
  };
}
