import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { needleTask, startFakeOpenAIServer, type FakeOpenAIServer, type FakeReply, type FakeRequest } from '../../src/testing.js';
import { closedPort, codeThenFinal, runCli, type CliResult } from '../cli/helpers.js';
import { eventually } from '../processes.js';
import { startRedis, type TestRedis } from '../redis-server.js';
import { tempFolder } from '../temp-folder.js';
import { idOf, mixedTasksFile, questionOf, resultLines, SENTENCES } from './helpers.js';

// Everything here runs as it would on many machines: a real redis-server, the real `rlm` binary as
// the coordinator and as each worker (child processes), and the fake upstream over HTTP with a
// model latency. Locks lapse after 2 s so a killed worker's tasks move on within seconds.

let redis: TestRedis;
let batchNumber = 0;
const started: ChildProcess[] = [];
let upstream: FakeOpenAIServer | undefined;

beforeAll(async () => {
  redis = await startRedis();
});

afterEach(async () => {
  for (const child of started.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await upstream?.close();
  upstream = undefined;
});

/** The fake upstream of a test (closed after it): the needle-finding root model, or `reply`. */
async function fakeUpstream(latencyMs: number, reply: (request: FakeRequest) => FakeReply | Promise<FakeReply> = needleSearch): Promise<FakeOpenAIServer> {
  upstream = await startFakeOpenAIServer({ reply, latencyMs });
  return upstream;
}

/**
 * The root model of every test: it finds the needle in one block (a regular expression over the context, in the
 * sandbox) and answers with what it printed: two model calls a task, so 200 tasks stay quick on a
 * busy machine, with answers that are still read from each task's own context.
 */
const needleSearch = codeThenFinal((request) => {
  const item = /item (\d+)/.exec(questionOf(request) ?? '')?.[1] ?? 'none';
  return `const text = typeof context === 'string' ? context : JSON.stringify(context);\nprint(/secret code of item ${item} is ([A-Z]{3}-\\d+)/.exec(text)?.[1] ?? 'NOT FOUND');`;
});

/** A batch name of its own for each test: the tests share one Redis. */
function newBatch(): string {
  return `test-${process.pid}-${++batchNumber}`;
}

interface Started {
  child: ChildProcess;
  /** What it wrote to stderr so far. */
  stderr: () => string;
  done: Promise<CliResult>;
}

/** Starts the real CLI as a long-lived process, its stderr readable as it comes. */
function start(args: string[]): Started {
  let child!: ChildProcess;
  let stderr = '';
  const done = runCli(args, {
    onStart: (process) => {
      child = process;
      process.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    },
  });
  started.push(child);
  return { child, stderr: () => stderr, done };
}

function startWorker({ batch, baseURL, dataDir, extra = [] }: { batch: string; baseURL: string; dataDir: string; extra?: string[] }): Started {
  return start(['worker', '--queue', redis.url, '--name', batch, '--base-url', baseURL, '--model', 'fake-rlm', '--data-dir', dataDir, '--lock-duration', '2', '--stalled-interval', '1', ...extra]);
}

function coordinatorArgs({ batch, tasks, out, extra = [] }: { batch: string; tasks: string; out: string; extra?: string[] }): string[] {
  return ['batch', tasks, '--out', out, '--queue', redis.url, '--name', batch, '--scorer', 'contains', ...extra];
}

async function status(batch: string): Promise<Record<string, unknown>> {
  const result = await runCli(['batch', 'status', '--queue', redis.url, '--name', batch, '--json']);
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as Record<string, unknown>;
}

/** Root requests that open a run (no assistant turn yet), counted per question: how often each task was started. */
function runsStarted(requests: FakeRequest[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const request of requests) {
    const messages = (request.body.messages ?? []) as { role: string }[];
    if (messages[0]?.role !== 'system' || messages.some((message) => message.role === 'assistant')) continue;
    const question = questionOf(request);
    if (question) counts.set(question, (counts.get(question) ?? 0) + 1);
  }
  return counts;
}

/** Ids of the tasks (of inlineTasks' first `count`) whose run sent a request but that have no result line. */
function startedWithoutLine(requests: FakeRequest[], lines: Record<string, unknown>[], count: number): string[] {
  const idOfQuestion = new Map(Array.from({ length: count }, (_, index) => [needleTask(index, SENTENCES).question, `t${index}`]));
  const written = new Set(lines.map(idOf));
  return [...runsStarted(requests).keys()].map((question) => idOfQuestion.get(question) ?? question).filter((id) => !written.has(id));
}

/** Needle tasks with inline contexts. */
function inlineTasks(folder: string, count: number, sentences = SENTENCES): string {
  const lines = Array.from({ length: count }, (_, index) => {
    const task = needleTask(index, sentences);
    return JSON.stringify({ id: `t${index}`, query: task.question, context: task.context, expected: task.answer });
  });
  const path = join(folder, 'tasks.jsonl');
  writeFileSync(path, `${lines.join('\n')}\n`);
  return path;
}

function expectOnceEach(out: string, count: number): Record<string, unknown>[] {
  const lines = resultLines(out);
  const ids = lines.map(idOf);
  expect(new Set(ids).size).toBe(count);
  expect(ids.length).toBe(count);
  return lines;
}

const statusOf = (line: Record<string, unknown>) => String(line.status ?? (line.rlm as { status: string }).status);

describe('rlm batch --queue and rlm worker', () => {
  it('runs 200 tasks on two workers: each answered once, right, read against the workers\' --data-dir; status matches the results', { timeout: 180_000 }, async () => {
    const { baseURL } = await fakeUpstream(20);
    const workerFolder = tempFolder('rlm-queue-worker-');
    const coordinatorFolder = tempFolder('rlm-queue-coordinator-');
    const { path } = mixedTasksFile(workerFolder, 200);
    // The coordinator's machine has the tasks file but not the context files: paths are the workers'.
    const tasks = join(coordinatorFolder, 'tasks.jsonl');
    copyFileSync(path, tasks);
    const out = join(coordinatorFolder, 'results.jsonl');
    const batch = newBatch();
    const workers = [startWorker({ batch, baseURL, dataDir: workerFolder, extra: ['--concurrency', '4'] }), startWorker({ batch, baseURL, dataDir: workerFolder, extra: ['--concurrency', '4'] })];

    const result = await runCli(coordinatorArgs({ batch, tasks, out }));

    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain('200 tasks: 200 completed, 0 failed, 0 not run');
    expect(result.stdout).toContain('accuracy: 100.0%');
    const lines = expectOnceEach(out, 200);
    expect(lines.filter((line) => 'custom_id' in line)).toHaveLength(50);
    for (const worker of workers) expect(worker.stderr()).toMatch(/: completed/);
    const figures = await status(batch);
    expect(figures).toMatchObject({ total: 200, completed: 200, failed: 0, waiting: 0, active: 0, uncollected: 0, etaSeconds: 0 });
    expect(figures.workers).toHaveLength(2);
    expect(figures.tasksPerMinute).toBeGreaterThan(0);
    for (const worker of workers) worker.child.kill('SIGTERM');
    for (const worker of workers) expect((await worker.done).code).toBe(0);
  });

  it('finishes the tasks of a worker killed with SIGKILL on the other worker, once each', { timeout: 120_000 }, async () => {
    const { baseURL } = await fakeUpstream(150);
    const folder = tempFolder('rlm-queue-kill-');
    const tasks = inlineTasks(folder, 16);
    const out = join(folder, 'results.jsonl');
    const batch = newBatch();
    const doomed = startWorker({ batch, baseURL, dataDir: folder, extra: ['--concurrency', '4'] });
    const coordinator = start(coordinatorArgs({ batch, tasks, out }));
    expect(await eventually(() => (doomed.stderr().match(/: started/g) ?? []).length >= 4, 30_000)).toBe(true);
    doomed.child.kill('SIGKILL');
    const cutShort = [...doomed.stderr().matchAll(/(t\d+): started/g)].map((match) => match[1]!).filter((id) => !doomed.stderr().includes(`${id}: completed`));
    expect(cutShort.length).toBeGreaterThan(0);
    const survivor = startWorker({ batch, baseURL, dataDir: folder, extra: ['--concurrency', '4'] });

    const result = await coordinator.done;

    expect(result.code, result.stderr).toBe(0);
    const lines = expectOnceEach(out, 16);
    expect(lines.every((line) => line.status === 'completed')).toBe(true);
    for (const id of cutShort) expect(survivor.stderr()).toContain(`${id}: completed`);
  });

  it('re-attaches when the coordinator is killed and started again: nothing queued twice, nothing lost', { timeout: 120_000 }, async () => {
    const server = await fakeUpstream(60);
    const folder = tempFolder('rlm-queue-coordinator-kill-');
    const tasks = inlineTasks(folder, 30);
    const out = join(folder, 'results.jsonl');
    const batch = newBatch();
    startWorker({ batch, baseURL: server.baseURL, dataDir: folder, extra: ['--concurrency', '3'] });
    const first = start(coordinatorArgs({ batch, tasks, out }));
    expect(await eventually(() => existsSync(out) && resultLines(out).length >= 5, 60_000)).toBe(true);
    first.child.kill('SIGKILL');
    await first.done;
    const writtenBefore = resultLines(out).length;
    // Jobs go on finishing while no coordinator runs: the next one collects them.
    const requestsAtKill = server.requests.length;
    expect(await eventually(() => server.requests.length >= requestsAtKill + 12, 30_000)).toBe(true);

    const second = await runCli(coordinatorArgs({ batch, tasks, out }));

    expect(second.code, second.stderr).toBe(0);
    expect(writtenBefore).toBeLessThan(30);
    const lines = expectOnceEach(out, 30);
    expect(lines.every((line) => line.status === 'completed')).toBe(true);
    const runs = runsStarted(server.requests);
    expect(runs.size).toBe(30);
    expect([...runs.values()].every((count) => count === 1)).toBe(true);
  });

  it('stops both workers once the batch budget, kept in Redis, is spent', { timeout: 120_000 }, async () => {
    const server = await fakeUpstream(40);
    const folder = tempFolder('rlm-queue-budget-');
    const tasks = inlineTasks(folder, 40);
    const out = join(folder, 'results.jsonl');
    const batch = newBatch();
    // $1 per thousand tokens: a task (two calls of 15 tokens) costs $0.03.
    const price = ['--price', 'fake-rlm=1000,1000'];
    const workers = [0, 1].map(() => startWorker({ batch, baseURL: server.baseURL, dataDir: folder, extra: ['--concurrency', '2', ...price] }));

    const result = await runCli(coordinatorArgs({ batch, tasks, out, extra: ['--max-budget', '0.2'] }));

    expect(result.code, result.stderr).toBe(1);
    expect(result.stderr).toContain('the batch budget is spent');
    const lines = resultLines(out);
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.length).toBeLessThan(40);
    const figures = await status(batch);
    expect(figures.budgetUsd).toBe(0.2);
    expect(figures.spentUsd as number).toBeGreaterThanOrEqual(0.2);
    // Past the budget only the calls already in flight on the four task slots were paid.
    expect(figures.spentUsd as number).toBeLessThanOrEqual(0.2 + 4 * 0.03 + 1e-9);
    expect(figures).toMatchObject({ waiting: 0, active: 0 });
    // Every task that started has its line: none started once the budget was spent.
    // (A task can have a line without a request: its first call found the budget spent.)
    expect(startedWithoutLine(server.requests, lines, 40), [result.stderr, ...workers.map((worker) => worker.stderr())].join('\n')).toEqual([]);
    const requestsAtEnd = server.requests.length;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(server.requests.length).toBe(requestsAtEnd);
    for (const worker of workers) expect(worker.child.exitCode).toBeNull();
  });

  it('gives a failed line to a task that started but was still due another try when the budget ran out', { timeout: 120_000 }, async () => {
    const folder = tempFolder('rlm-queue-budget-retry-');
    const tasks = inlineTasks(folder, 12);
    const unlucky = needleTask(0, SENTENCES).question;
    // t0's upstream keeps saying 429: its try fails after rlm's own retries, and the next try waits
    // 60 s (--retry-delay) while the other tasks spend the budget.
    const server = await fakeUpstream(40, (request) =>
      questionOf(request) === unlucky ? { status: 429, headers: { 'retry-after': '0' }, error: { message: 'rate limited', type: 'rate_limit_error' } } : needleSearch(request),
    );
    const out = join(folder, 'results.jsonl');
    const batch = newBatch();
    startWorker({ batch, baseURL: server.baseURL, dataDir: folder, extra: ['--concurrency', '2', '--price', 'fake-rlm=1000,1000'] });

    const result = await runCli(coordinatorArgs({ batch, tasks, out, extra: ['--max-budget', '0.1', '--retry-delay', '60'] }));

    expect(result.code, result.stderr).toBe(1);
    const lines = resultLines(out);
    expect(lines.length).toBeLessThan(12);
    const t0 = lines.find((line) => idOf(line) === 't0');
    expect(t0).toMatchObject({ status: 'failed', attempts: 1, error: { code: 'max_budget' } });
    expect((t0!.error as { message: string }).message).toMatch(/^Try 1 failed \(.*rate limited.*\), and the batch budget was spent before another try\.$/);
    expect(startedWithoutLine(server.requests, lines, 12)).toEqual([]);
  });

  it('drains a worker on SIGTERM: running tasks finish, it exits 0; past the grace period they go back to the queue', { timeout: 120_000 }, async () => {
    const { baseURL } = await fakeUpstream(400);
    const folder = tempFolder('rlm-queue-drain-');
    const tasks = inlineTasks(folder, 6);
    const out = join(folder, 'results.jsonl');
    const batch = newBatch();
    const patient = startWorker({ batch, baseURL, dataDir: folder, extra: ['--concurrency', '2'] });
    const coordinator = start(coordinatorArgs({ batch, tasks, out }));
    expect(await eventually(() => (patient.stderr().match(/: started/g) ?? []).length >= 2, 30_000)).toBe(true);
    patient.child.kill('SIGTERM');
    const drained = await patient.done;
    expect(drained.code).toBe(0);
    // The two running tasks finished during the grace period, and no other started.
    expect(drained.stderr.match(/: completed/g)).toHaveLength(2);
    expect(drained.stderr.match(/: started/g)).toHaveLength(2);

    const hasty = startWorker({ batch, baseURL, dataDir: folder, extra: ['--concurrency', '2', '--grace', '0.2'] });
    expect(await eventually(() => (hasty.stderr().match(/: started/g) ?? []).length >= 2, 30_000)).toBe(true);
    hasty.child.kill('SIGTERM');
    const handedBack = await hasty.done;
    expect(handedBack.code).toBe(0);
    expect(handedBack.stderr).toMatch(/handed back to the queue/);
    startWorker({ batch, baseURL, dataDir: folder, extra: ['--concurrency', '4'] });

    const result = await coordinator.done;
    expect(result.code, result.stderr).toBe(0);
    expect(expectOnceEach(out, 6).every((line) => line.status === 'completed')).toBe(true);
  });

  it("shares one request queue per model among a worker's tasks: --max-concurrency holds for all of them", { timeout: 60_000 }, async () => {
    let inFlight = 0;
    let most = 0;
    const server = await fakeUpstream(0, async (request) => {
      most = Math.max(most, ++inFlight);
      await new Promise((resolve) => setTimeout(resolve, 100));
      inFlight--;
      return needleSearch(request);
    });
    const folder = tempFolder('rlm-queue-scheduler-');
    const tasks = inlineTasks(folder, 6);
    const out = join(folder, 'results.jsonl');
    const batch = newBatch();
    const worker = startWorker({ batch, baseURL: server.baseURL, dataDir: folder, extra: ['--concurrency', '3', '--max-concurrency', '1'] });

    const result = await runCli(coordinatorArgs({ batch, tasks, out }));

    expect(result.code, result.stderr).toBe(0);
    expectOnceEach(out, 6);
    // Three tasks ran at once (their runs overlapped), yet one request at a time reached the model.
    expect(worker.stderr()).toMatch(/t\d: started[\s\S]*t\d: started[\s\S]*t\d: started[\s\S]*: completed/);
    expect(most).toBe(1);
  });

  it('refuses a task too large to travel inline, with advice, before anything is queued', async () => {
    const folder = tempFolder('rlm-queue-inline-');
    const tasks = join(folder, 'tasks.jsonl');
    // Random text compresses little: 200 KB stays over a limit of 0.05 MB.
    writeFileSync(tasks, `${JSON.stringify({ id: 'small', query: 'q', context: 'short' })}\n${JSON.stringify({ id: 'big', query: 'q', context: randomBytes(100_000).toString('hex') })}\n`);
    const batch = newBatch();

    const result = await runCli(coordinatorArgs({ batch, tasks, out: join(folder, 'results.jsonl'), extra: ['--max-inline-mb', '0.05'] }));

    expect(result.code).toBe(2);
    expect(result.stderr).toContain('Task "big" (line 2)');
    expect(result.stderr).toContain('context_path');
    expect(await status(batch)).toMatchObject({ total: 0, waiting: 0 });
  });

  it('fails the tasks of a worker that cannot reach the model, with the reason, after --attempts tries', { timeout: 120_000 }, async () => {
    const folder = tempFolder('rlm-queue-unreachable-');
    const tasks = inlineTasks(folder, 2);
    const out = join(folder, 'results.jsonl');
    const batch = newBatch();
    startWorker({ batch, baseURL: `http://127.0.0.1:${await closedPort()}/v1`, dataDir: folder, extra: ['--concurrency', '2'] });

    const result = await runCli(coordinatorArgs({ batch, tasks, out, extra: ['--attempts', '2', '--retry-delay', '0.1'] }));

    expect(result.code, result.stderr).toBe(1);
    expect(result.stdout).toContain('2 tasks: 0 completed, 2 failed');
    expect(result.stdout).toContain('failed with model_error: 2');
    const lines = expectOnceEach(out, 2);
    for (const line of lines) {
      expect(line).toMatchObject({ status: 'failed', attempts: 2, error: { code: 'model_error' } });
      expect(String((line.error as { message: string }).message)).toMatch(/connect|ECONNREFUSED|Connection/i);
    }
    expect(await status(batch)).toMatchObject({ total: 2, completed: 0, failed: 2 });
    expect(lines.map(statusOf)).toEqual(['failed', 'failed']);
    expect(readFileSync(out, 'utf8').endsWith('\n')).toBe(true);
  });
});
