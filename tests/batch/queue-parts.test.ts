import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { batchKeys, readBudget } from '../../src/batch/queue/batch-record.js';
import { jobIdOf, taskIdOfJob, taskJobData, taskLineOf } from '../../src/batch/queue/task-jobs.js';
import { ConfigurationError } from '../../src/errors.js';
import { SCORERS } from '../../src/index.js';
import { checkBatchName, connectionOptions, displayUrl, RedisSpendAccount, runQueuedBatch, runTaskLine, startQueueWorker } from '../../src/queue.js';
import { needleTask, rlmStrategyReply, startFakeOpenAIServer, type FakeOpenAIServer } from '../../src/testing.js';
import { closedPort, runCli } from '../cli/helpers.js';
import { startRedis, type TestRedis } from '../redis-server.js';
import { tempFolder } from '../temp-folder.js';

let redis: TestRedis;

beforeAll(async () => {
  redis = await startRedis();
});

describe('queue addresses', () => {
  it('reads password, database and TLS from the URL, and never prints the password', () => {
    expect(connectionOptions('redis://:s3cret@cache.internal:6380/2')).toMatchObject({ host: 'cache.internal', port: 6380, password: 's3cret', db: 2, maxRetriesPerRequest: null });
    expect(connectionOptions('rediss://user:pw@cache.internal')).toMatchObject({ port: 6379, username: 'user', password: 'pw', tls: { servername: 'cache.internal' } });
    expect(displayUrl('redis://:s3cret@cache.internal:6380/2')).toBe('redis://:***@cache.internal:6380/2');
  });

  it('says so when Redis does not answer, instead of waiting for ever', { timeout: 30_000 }, async () => {
    const url = `redis://:s3cret@127.0.0.1:${await closedPort()}`;
    for (const args of [['batch', 'status', '--queue', url], ['worker', '--queue', url, '--base-url', 'http://127.0.0.1:9/v1']]) {
      const result = await runCli(args);
      expect(result.code).toBe(2);
      expect(result.stderr).toMatch(/Cannot reach Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:\d+ within 10 s \(connect ECONNREFUSED/);
    }
  });

  it('refuses what is not a Redis URL, and batch names that cannot be part of a key', () => {
    for (const url of ['http://localhost:6379', 'localhost:6379', 'redis://host/notadb']) expect(() => connectionOptions(url)).toThrow(ConfigurationError);
    expect(() => connectionOptions('redis://:s3cret@host/x')).toThrow(/redis:\/\/:\*\*\*@host/);
    expect(checkBatchName('nightly-2026.11_a')).toBe('nightly-2026.11_a');
    for (const name of ['', 'a:b', 'a b', 'x'.repeat(101)]) expect(() => checkBatchName(name)).toThrow(ConfigurationError);
  });
});

describe('task jobs', () => {
  it('gives ids BullMQ accepts to task ids with ":" and to numeric ids, one job per id', async () => {
    const queue = new Queue('ids', { connection: connectionOptions(redis.url), prefix: 'rlm' });
    try {
      for (const taskId of ['doc:12:b', '42', 'ünïcode/é']) {
        const first = await queue.add('task', { taskId }, { jobId: jobIdOf(taskId) });
        const again = await queue.add('task', { taskId }, { jobId: jobIdOf(taskId) });
        expect(again.id).toBe(first.id);
        expect(taskIdOfJob(first.id!)).toBe(taskId);
      }
      expect(await queue.count()).toBe(3);
    } finally {
      await queue.obliterate({ force: true });
      await queue.close();
    }
  });

  it('carries the task line compressed, and refuses one over the limit with advice', () => {
    const line = JSON.stringify({ id: 'a', query: 'q', context: 'word '.repeat(100_000) });
    const data = taskJobData({ taskId: 'a', line, lineNumber: 3, maxBytes: 16 * 2 ** 20, settings: { scorer: 'contains' } });
    expect(data.line.length).toBeLessThan(line.length / 50);
    expect(taskLineOf(JSON.parse(JSON.stringify(data)))).toEqual({ taskId: 'a', line, settings: { scorer: 'contains' } });
    expect(() => taskJobData({ taskId: 'a', line, lineNumber: 3, maxBytes: 100, settings: {} })).toThrow(/Task "a" \(line 3\).*over the queue's limit.*context_path.*--max-inline-mb/);
    expect(() => taskLineOf({ format: 'something-else/9', taskId: 'a', line: '' })).toThrow(/one version/);
  });
});

describe('the Redis spend account', () => {
  it('counts every charge of many workers at once, and says what is left', async () => {
    const keys = batchKeys('spend-test');
    const queue = new Queue('spend-test', { connection: connectionOptions(redis.url), prefix: 'rlm' });
    const other = new Queue('spend-test', { connection: connectionOptions(redis.url), prefix: 'rlm' });
    try {
      const [clientA, clientB] = [await queue.client, await other.client];
      await clientA.hset(keys.info, { budget_usd: 1 });
      const accounts = [new RedisSpendAccount({ client: clientA, keys }), new RedisSpendAccount({ client: clientB, keys })];
      await Promise.all(Array.from({ length: 200 }, (_, index) => accounts[index % 2]!.charge(0.005)));
      expect((await readBudget(clientA, keys)).spentUsd).toBeCloseTo(1, 9);
      expect(await accounts[1]!.remaining()).toBeCloseTo(0, 9);
      await clientA.hdel(keys.info, 'budget_usd');
      expect(await accounts[0]!.remaining()).toBe(Infinity);
    } finally {
      await queue.close();
      await other.close();
    }
  });
});

describe('a queued batch when the budget runs out', () => {
  it('writes no line for a task whose run found the budget spent before it started', { timeout: 60_000 }, async () => {
    const folder = tempFolder('rlm-queue-not-started-');
    const tasksPath = join(folder, 'tasks.jsonl');
    writeFileSync(tasksPath, ['a', 'b', 'c'].map((id) => JSON.stringify({ id, query: 'q', context: 'x' })).join('\n'));
    const out = join(folder, 'results.jsonl');
    const address = { url: redis.url, name: `not-started-${process.pid}` };
    // The worker's check passes; by the time the run checks, another worker has spent it all.
    const worker = await startQueueWorker({
      address,
      concurrency: 1,
      graceMs: 1_000,
      lockDurationMs: 30_000,
      stalledIntervalMs: 30_000,
      runTask: async ({ account }) => {
        await account!.charge(1);
        return undefined;
      },
    });
    try {
      const summary = await runQueuedBatch({
        address,
        tasksPath,
        out,
        settings: {},
        maxBudgetUsd: 1,
        retryFailed: false,
        attempts: 1,
        backoffMs: 1_000,
        maxInlineBytes: 2 ** 20,
        collectIntervalMs: 50,
        signal: new AbortController().signal,
      });
      expect(summary).toMatchObject({ tasks: 3, completed: 0, failed: 0, notRun: 3, stoppedBy: 'budget' });
      expect(existsSync(out) ? readFileSync(out, 'utf8') : '').toBe('');
    } finally {
      await worker.stop();
    }
  });
});

describe('a worker running one task line', () => {
  let upstream: FakeOpenAIServer;
  beforeAll(async () => {
    upstream = await startFakeOpenAIServer({ reply: rlmStrategyReply });
  });
  afterAll(() => upstream.close());

  it('fetches a context given as an http(s) URL, and reads a relative path against its own data folder', { timeout: 60_000 }, async () => {
    const task = needleTask(7, 30);
    const contextServer = createServer((request, response) => {
      if (request.url === '/contexts/needle.txt') response.end(task.context);
      else response.writeHead(404).end();
    });
    await new Promise<void>((resolve) => contextServer.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(contextServer.address() as AddressInfo).port}/contexts/needle.txt`;
    const options = { model: 'fake-rlm', baseURL: upstream.baseURL, dataDir: tempFolder('rlm-worker-data-') };
    try {
      const run = (line: object) => runTaskLine({ line: JSON.stringify(line), options, scorer: SCORERS.contains, account: undefined, attempts: 2, signal: new AbortController().signal });
      const fetched = await run({ id: 'u', query: task.question, context_path: url, expected: task.answer });
      expect(fetched).toMatchObject({ status: 'completed', retriable: false, line: { id: 'u', status: 'completed', attempts: 2, score: 1 } });
      expect(String((fetched!.line as { answer: string }).answer)).toContain(task.answer);
      await expect(run({ id: 'm', query: task.question, context_path: url.replace('needle', 'missing') })).rejects.toThrow(/HTTP 404/);
      await expect(run({ id: 'p', query: task.question, context_path: 'not-here.txt' })).rejects.toThrow(/not found.*relative to/);
    } finally {
      contextServer.close();
    }
  });
});
