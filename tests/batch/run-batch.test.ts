import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readResults, readTasksFile, runBatch, type BatchEvent, type TaskLine } from '../../src/index.js';
import { needleTask, rlmStrategyReply, startFakeOpenAIServer, type FakeOpenAIServer, type FakeReply, type FakeRequest } from '../../src/testing.js';
import { tempFolder } from '../temp-folder.js';
import { idOf, mixedTasksFile, questionOf, resultLines, SENTENCES } from './helpers.js';

const servers: FakeOpenAIServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

async function upstream(reply: (request: FakeRequest, index: number) => FakeReply | Promise<FakeReply> = rlmStrategyReply, latencyMs = 0) {
  const server = await startFakeOpenAIServer({ reply, latencyMs });
  servers.push(server);
  return server;
}

/** A root model's first turn: rlm's system prompt, and no reply of the root model yet. */
const isFirstRootTurn = (request: FakeRequest) => {
  const messages = request.body.messages as { role: string }[];
  return messages[0]?.role === 'system' && !messages.some((message) => message.role === 'assistant');
};

function needleLines(count: number, from = 0): TaskLine[] {
  return Array.from({ length: count }, (_, offset) => {
    const task = needleTask(from + offset, SENTENCES);
    return { id: `n${from + offset}`, query: task.question, context: task.context, expected: task.answer };
  });
}

describe('runBatch', () => {
  it('answers 1,000 tasks right, each once, through an upstream that fails one request in ten', { timeout: 900_000 }, async () => {
    const server = await startFakeOpenAIServer({ reply: rlmStrategyReply, faultRate: 0.1, seed: 7 });
    servers.push(server);
    const out = join(tempFolder('rlm-batch-flaky-'), 'results.jsonl');
    // A stalled or silent reply is cut after a second of silence and retried, as the soak bench runs.
    // A request fails for good only when all four of its tries meet a fault (about 1 in 10,000 at
    // 10%): a root call's failure fails its try, and the task is tried again (attempts); a sub-call's
    // failure reaches the model as an error, and the model asks that part once more.
    const summary = await runBatch({ model: 'fake-rlm', baseURL: server.baseURL, idleTimeoutMs: 1_000, tasks: needleLines(1_000), out, concurrency: 32, scorer: 'contains' });

    const injected = Object.values(server.faultsInjected).reduce((total, count) => total + count, 0);
    expect(injected).toBeGreaterThan(server.requests.length * 0.05);
    expect(summary).toMatchObject({ tasks: 1_000, completed: 1_000, failed: 0 });
    const lines = resultLines(out);
    expect(lines.filter((line) => line.score !== 1).map((line) => `${idOf(line)}: ${JSON.stringify(line.answer)}`)).toEqual([]);
    expect(summary.accuracy).toBe(1);
    expect(lines).toHaveLength(1_000);
    expect(new Set(lines.map(idOf)).size).toBe(1_000);
  });

  it('runs 200 tasks of mixed shapes at concurrency 8: every id answered once, right, in its own shape', { timeout: 600_000 }, async () => {
    const server = await upstream();
    const folder = tempFolder('rlm-batch-');
    const { path, answers } = mixedTasksFile(folder, 200);
    const out = join(folder, 'results.jsonl');
    let running = 0;
    let mostRunning = 0;
    const onEvent = (event: BatchEvent) => {
      if (event.type === 'task-start') mostRunning = Math.max(mostRunning, ++running);
      if (event.type === 'task-end') running--;
    };
    const summary = await runBatch({ model: 'fake-rlm', baseURL: server.baseURL, tasks: readTasksFile(path), out, concurrency: 8, scorer: 'contains', onEvent });

    expect(summary).toMatchObject({ tasks: 200, completed: 200, failed: 0, notRun: 0, accuracy: 1, scored: 200, stoppedBy: null });
    expect(mostRunning).toBe(8);
    const lines = resultLines(out);
    expect(lines.map(idOf).sort()).toEqual([...answers.keys()].sort());
    for (const line of lines) {
      const answer = answers.get(idOf(line))!;
      if (line.custom_id) {
        // The OpenAI Batch API's output shape, for the lines that came in its input shape.
        expect(line).toMatchObject({ id: expect.stringMatching(/^batch_req_/), error: null, response: { status_code: 200, request_id: expect.any(String) } });
        const body = (line.response as { body: { object: string; choices: { message: { content: string } }[] } }).body;
        expect(body.object).toBe('chat.completion');
        expect(body.choices[0]!.message.content).toContain(answer);
        expect(line.rlm).toMatchObject({ status: 'completed', score: 1, attempts: 1 });
      } else {
        expect(line).toMatchObject({ status: 'completed', score: 1, attempts: 1, iterations: 3, forced: false });
        expect(line.answer).toContain(answer);
      }
    }
    // Each task's run took its three root turns, and no task ran twice.
    const firstTurns = server.requests.filter(isFirstRootTurn);
    expect(firstTurns).toHaveLength(200);
    expect(new Set(firstTurns.map(questionOf)).size).toBe(200);
  });

  it('tries a task again when its failure may pass (an upstream still failing after the client\'s retries), up to attempts', { timeout: 120_000 }, async () => {
    let unavailable = 0;
    const server = await upstream((request) => {
      // Task n1's first request meets a server that is down through all of the client's tries.
      if (questionOf(request) === needleTask(1, SENTENCES).question && unavailable < 4) {
        unavailable++;
        return { status: 503, error: { message: 'overloaded', type: 'server_error' } };
      }
      return rlmStrategyReply(request);
    });
    const notices: string[] = [];
    const options = { model: 'fake-rlm', baseURL: server.baseURL, concurrency: 2, scorer: 'contains' as const };
    const summary = await runBatch({ ...options, tasks: needleLines(3), onEvent: (event) => event.type === 'notice' && notices.push(`${event.id}: ${event.text}`) });
    expect(summary).toMatchObject({ completed: 3, failed: 0, accuracy: 1 });
    expect(unavailable).toBe(4);
    expect(notices).toEqual([expect.stringMatching(/^n1: try 1 of 3 failed \(.*503.*\): trying again$/)]);

    unavailable = 0;
    const once = await runBatch({ ...options, tasks: needleLines(3), attempts: 1 });
    expect(once).toMatchObject({ completed: 2, failed: 1, failuresByCode: { model_error: 1 } });
  });

  it('skips completed tasks when run again, and runs failed ones again only with retryFailed', async () => {
    let failNext = true;
    const server = await upstream((request) => {
      // The first run of task n1 meets a server that refuses it (a client error is not retried).
      if (failNext && questionOf(request) === needleTask(1, SENTENCES).question) {
        failNext = false;
        return { status: 400, error: { message: 'bad request', type: 'invalid_request_error' } };
      }
      return rlmStrategyReply(request);
    });
    const out = join(tempFolder('rlm-batch-'), 'results.jsonl');
    const options = { model: 'fake-rlm', baseURL: server.baseURL, out, concurrency: 2, scorer: 'contains' as const };
    const first = await runBatch({ ...options, tasks: needleLines(3) });
    expect(first).toMatchObject({ completed: 2, failed: 1, failuresByCode: { model_error: 1 } });
    const afterFirst = server.requests.length;

    const again = await runBatch({ ...options, tasks: needleLines(3) });
    expect(again).toMatchObject({ completed: 2, failed: 1 });
    expect(server.requests.length).toBe(afterFirst);

    const retried = await runBatch({ ...options, tasks: needleLines(3), retryFailed: true });
    expect(retried).toMatchObject({ completed: 3, failed: 0, accuracy: 1 });
    expect(readResults(out).get('n1')).toMatchObject({ status: 'completed', attempts: 2 });
    expect(resultLines(out).map(idOf)).toEqual(expect.arrayContaining(['n0', 'n1', 'n2']));
    expect(resultLines(out)).toHaveLength(4);
  });

  it('stops starting tasks once the batch budget is spent; running tasks share what is left', async () => {
    const server = await upstream();
    const out = join(tempFolder('rlm-batch-'), 'results.jsonl');
    const started: string[] = [];
    // Every call costs 15 tokens at $1 per million: a task of five calls about $0.000075.
    const summary = await runBatch({
      model: 'fake-rlm',
      baseURL: server.baseURL,
      prices: { 'fake-rlm': { inputPerMillion: 1, outputPerMillion: 1 } },
      tasks: needleLines(10),
      out,
      concurrency: 1,
      maxBudgetUsd: 0.0002,
      onEvent: (event) => {
        if (event.type === 'task-start') started.push(event.id);
      },
    });
    expect(summary.stoppedBy).toBe('budget');
    expect(started.length).toBeGreaterThanOrEqual(2);
    expect(started.length).toBeLessThan(5);
    expect(summary.notRun).toBe(10 - started.length);
    // Nothing was asked for the tasks that never started.
    const asked = new Set(server.requests.map(questionOf));
    expect(asked.has(needleTask(started.length, SENTENCES).question)).toBe(false);
    expect(summary.cost.totalUsd).toBeGreaterThanOrEqual(0.0002);
    expect(summary.cost.totalUsd).toBeLessThan(0.0002 + 0.0001);
  });

  it('fails a running task whose next call finds the shared budget spent', async () => {
    const server = await upstream();
    const summary = await runBatch({
      model: 'fake-rlm',
      baseURL: server.baseURL,
      prices: { 'fake-rlm': { inputPerMillion: 1, outputPerMillion: 1 } },
      tasks: needleLines(2),
      concurrency: 2,
      // Less than one task's calls: both tasks start, and the one whose call finds the account empty stops.
      maxBudgetUsd: 0.00004,
    });
    expect(summary.failed).toBeGreaterThanOrEqual(1);
    expect(summary.failuresByCode.max_budget).toBe(summary.failed);
  });

  it('holds back every task’s requests to a model after a 429 with retry-after, not only the one that got it', async () => {
    const RETRY_AFTER_S = 1.5;
    const slowQuestion = needleTask(0, SENTENCES).question;
    let rateLimitedAt: number | undefined;
    const seen: { question: string | undefined; at: number }[] = [];
    const server = await upstream((request) => {
      const question = questionOf(request);
      seen.push({ question, at: Date.now() });
      // Task n0's second root turn is refused once; task n1 keeps asking meanwhile.
      const turn = (request.body.messages as { role: string }[]).filter((message) => message.role === 'assistant').length;
      if (rateLimitedAt === undefined && question === slowQuestion && turn === 1) {
        rateLimitedAt = Date.now();
        return { status: 429, headers: { 'retry-after': String(RETRY_AFTER_S) }, error: { message: 'slow down', type: 'rate_limit_error' } };
      }
      return rlmStrategyReply(request);
    });
    const summary = await runBatch({ model: 'fake-rlm', baseURL: server.baseURL, tasks: needleLines(2), concurrency: 2 });
    expect(summary.completed).toBe(2);
    expect(rateLimitedAt).toBeDefined();
    // (A request of the other task already on its way when the 429 was sent may arrive just after it.)
    const otherAfter = seen.filter((entry) => entry.question !== slowQuestion && entry.at > rateLimitedAt! + 50);
    expect(otherAfter.length).toBeGreaterThan(0);
    // Timers may fire a little early or late; nothing of the other task came in the first 90% of the wait.
    for (const entry of otherAfter) expect(entry.at - rateLimitedAt!).toBeGreaterThanOrEqual(RETRY_AFTER_S * 900);
  });

  it('makes every task share one request limit per model (maxConcurrency)', async () => {
    let inFlight = 0;
    let most = 0;
    const server = await upstream(async (request) => {
      most = Math.max(most, ++inFlight);
      await new Promise((resolve) => setTimeout(resolve, 20));
      inFlight--;
      return rlmStrategyReply(request);
    });
    const summary = await runBatch({ model: 'fake-rlm', baseURL: server.baseURL, tasks: needleLines(4), concurrency: 4, maxConcurrency: 1 });
    expect(summary.completed).toBe(4);
    expect(most).toBe(1);
  });

  it('caps each task with taskBudgetUsd, and reports a scorer that throws as that task\'s problem', async () => {
    const server = await upstream();
    const capped = await runBatch({ model: 'fake-rlm', baseURL: server.baseURL, prices: { 'fake-rlm': { inputPerMillion: 1, outputPerMillion: 1 } }, tasks: needleLines(2), taskBudgetUsd: 0.00002 });
    expect(capped).toMatchObject({ failed: 2, failuresByCode: { max_budget: 2 }, stoppedBy: null });
    const records: { score?: number; score_error?: string }[] = [];
    const scored = await runBatch({
      model: 'fake-rlm',
      baseURL: server.baseURL,
      tasks: needleLines(1),
      scorer: () => {
        throw new Error('no idea');
      },
      onResult: (record) => records.push(record),
    });
    expect(scored).toMatchObject({ completed: 1, accuracy: 0 });
    expect(records[0]).toMatchObject({ score: 0, score_error: 'the scorer failed: no idea' });
  });

  it('ignores a torn last line of the results file and appends after it cleanly', async () => {
    const server = await upstream();
    const out = join(tempFolder('rlm-batch-'), 'results.jsonl');
    await runBatch({ model: 'fake-rlm', baseURL: server.baseURL, tasks: needleLines(1), out });
    const whole = resultLines(out)[0]!;
    // A crash while writing the second task's line left half of it.
    writeFileSync(out, `${JSON.stringify(whole)}\n${JSON.stringify({ ...whole, id: 'n1' }).slice(0, 40)}`);
    expect([...readResults(out).keys()]).toEqual(['n0']);

    const before = server.requests.length;
    const summary = await runBatch({ model: 'fake-rlm', baseURL: server.baseURL, tasks: needleLines(2), out });
    expect(summary).toMatchObject({ completed: 2, failed: 0 });
    expect(server.requests.length).toBeGreaterThan(before);
    expect(resultLines(out).map(idOf)).toEqual(['n0', 'n1']);
  });

  it('checks an array of tasks whole before any model call', async () => {
    const server = await upstream();
    const tasks = [...needleLines(2), { id: 'n0', query: 'again?', context: 'x' }];
    await expect(runBatch({ model: 'fake-rlm', baseURL: server.baseURL, tasks })).rejects.toThrow(/task 3: duplicate id "n0"/);
    expect(server.requests).toHaveLength(0);
  });

  it('takes tasks from an async iterable', async () => {
    const server = await upstream();
    async function* lines() {
      yield* needleLines(3);
    }
    const records: string[] = [];
    const summary = await runBatch({ model: 'fake-rlm', baseURL: server.baseURL, tasks: lines(), concurrency: 2, scorer: 'contains', onResult: (record) => records.push(record.id) });
    expect(summary).toMatchObject({ tasks: 3, completed: 3, accuracy: 1 });
    expect(records.sort()).toEqual(['n0', 'n1', 'n2']);
  });
});
