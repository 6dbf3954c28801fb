import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/main.js';
import { needleTask, rlmStrategyReply, startFakeOpenAIServer, type FakeOpenAIServer, type FakeRequest } from '../../src/testing.js';
import { idOf, questionOf, resultLines, SENTENCES } from '../batch/helpers.js';
import { eventually, killSurvivors, workerPids } from '../processes.js';
import { tempFolder } from '../temp-folder.js';
import { runCli } from './helpers.js';

let server: FakeOpenAIServer;
/** Questions the upstream refuses with a 400 (a client error: not retried, so the task fails). */
const refused = new Set<string>();

beforeAll(async () => {
  server = await startFakeOpenAIServer({
    reply: (request) => (refused.has(questionOf(request) ?? '') ? { status: 400, error: { message: 'refused', type: 'invalid_request_error' } } : rlmStrategyReply(request)),
    // Slow enough that a batch can be stopped in the middle.
    latencyMs: 40,
  });
});
afterAll(() => server.close());

function tasksFile(count: number, from = 0): { folder: string; path: string; out: string } {
  const folder = tempFolder('rlm-cli-batch-');
  const lines = Array.from({ length: count }, (_, offset) => {
    const task = needleTask(from + offset, SENTENCES);
    return JSON.stringify({ id: `c${from + offset}`, query: task.question, context: task.context, expected: task.answer });
  });
  const path = join(folder, 'tasks.jsonl');
  writeFileSync(path, `${lines.join('\n')}\n`);
  return { folder, path, out: join(folder, 'results.jsonl') };
}

const base = () => ['batch', '--base-url', server.baseURL, '--model', 'fake-rlm'];

/** A root model's first turn: one per start of a task. */
const isFirstRootTurn = (request: FakeRequest) => {
  const messages = request.body.messages as { role: string }[];
  return messages[0]?.role === 'system' && !messages.some((message) => message.role === 'assistant');
};

function firstTurnsOf(question: string, since: number): number {
  return server.requests.slice(since).filter((request) => isFirstRootTurn(request) && questionOf(request) === question).length;
}

describe('rlm batch', () => {
  it('runs every task, prints the summary as JSON, exits 0; run again, it asks the model nothing', { timeout: 60_000 }, async () => {
    const { path, out } = tasksFile(3);
    const first = await runCli([...base(), path, '--out', out, '--scorer', 'contains', '--json', '--concurrency', '2']);
    expect(first.code, first.stderr).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({ tasks: 3, completed: 3, failed: 0, accuracy: 1, stoppedBy: null, tokensByModel: { 'fake-rlm': expect.any(Object) } });
    // Not a terminal: one plain line per finished task.
    expect(first.stderr.match(/^rlm: \d\/3 c\d completed in /gm)).toHaveLength(3);
    const before = server.requests.length;
    const again = await runCli([...base(), path, '--out', out, '--quiet']);
    expect(again.code).toBe(0);
    expect(again.stderr).toBe('');
    expect(again.stdout).toMatch(/^3 tasks: 3 completed, 0 failed, 0 not run$/m);
    expect(server.requests.length).toBe(before);
  });

  it('exits 1 when a task failed, with its code in the summary', { timeout: 60_000 }, async () => {
    const { path, out } = tasksFile(2, 10);
    refused.add(needleTask(11, SENTENCES).question);
    const result = await runCli([...base(), path, '--out', out, '--json']);
    expect(result.code).toBe(1);
    expect(JSON.parse(result.stdout)).toMatchObject({ completed: 1, failed: 1, failuresByCode: { model_error: 1 } });
    expect(resultLines(out).find((line) => line.id === 'c11')).toMatchObject({ status: 'failed', answer: null, error: { code: 'model_error' } });
  });

  it('refuses every kind of bad task line with exit 2, naming the line, before any model call', { timeout: 60_000 }, async () => {
    const good = JSON.stringify({ id: 'ok', query: 'q?', context: 'x' });
    const openAI = (body: unknown, extra = {}) => JSON.stringify({ custom_id: 'o', method: 'POST', url: '/v1/chat/completions', body, ...extra });
    const cases: [string, RegExp][] = [
      ['{"id": "a", "query": ', /line 2: not valid JSON/],
      [JSON.stringify({ id: 'a', context: 'x' }), /line 2: missing "query"/],
      [JSON.stringify({ id: 'ok', query: 'again?', context: 'x' }), /line 2: duplicate id "ok"/],
      [JSON.stringify({ id: 'a', query: 'q?', context_path: 'nowhere.txt' }), /line 2: context path nowhere.txt not found \(paths are relative to /],
      [JSON.stringify({ id: 'a', query: 'q?', context: 'x', context_path: 'y.txt' }), /line 2: give one of "context", "context_path" or "context_paths"/],
      [JSON.stringify({ id: 'a', query: 'q?', output_schema: { type: 'no-such-type' } }), /line 2: output_schema: /],
      [openAI({ model: 'm', messages: [{ role: 'user', content: 'q' }] }, { url: '/v1/embeddings' }), /line 2: url must be "\/v1\/chat\/completions"/],
      [openAI({ model: 'm', messages: [] }), /line 2: body: Invalid request: messages/],
      [openAI({ model: 'm', messages: [{ role: 'user', content: 'q' }], tools: [{ type: 'function', function: { name: 't' } }] }), /line 2: the request has tools/],
      ['[1, 2]', /line 2: a task must be a JSON object/],
    ];
    const before = server.requests.length;
    for (const [line, message] of cases) {
      const folder = tempFolder('rlm-cli-batch-');
      const path = join(folder, 'tasks.jsonl');
      writeFileSync(path, `${good}\n${line}\n`);
      const result = await runCli([...base(), path, '--out', join(folder, 'results.jsonl')]);
      expect(result.code, line).toBe(2);
      expect(result.stderr, line).toMatch(message);
      expect(existsSync(join(folder, 'results.jsonl')), line).toBe(false);
    }
    expect(server.requests.length).toBe(before);
  });

  it('exits 2 without --out, with an unknown scorer, and with a budget but no price', async () => {
    const { path, out } = tasksFile(1, 20);
    expect((await runCli([...base(), path])).stderr).toMatch(/Give the results file with --out/);
    const scorer = await runCli([...base(), path, '--out', out, '--scorer', 'fuzzy']);
    expect([scorer.code, scorer.stderr]).toEqual([2, expect.stringMatching(/Unknown scorer "fuzzy"/)]);
    const budget = await runCli([...base(), path, '--out', out, '--max-budget', '1']);
    expect([budget.code, budget.stderr]).toEqual([2, expect.stringMatching(/needs prices.*fake-rlm/)]);
  });

  for (const signal of ['SIGINT', 'SIGKILL'] as const) {
    it(`keeps every finished task when stopped with ${signal}; a rerun finishes the rest without running them again`, { timeout: 120_000 }, async () => {
      const { path, out } = tasksFile(8, signal === 'SIGINT' ? 30 : 40);
      const since = server.requests.length;
      let workers: number[] = [];
      const stopped = await runCli([...base(), path, '--out', out, '--concurrency', '2'], {
        onStart: (child) => {
          void eventually(() => existsSync(out) && resultLines(out).length >= 2, 60_000).then(() => {
            workers = workerPids(child.pid);
            child.kill(signal);
          });
        },
      });
      killSurvivors(workers);
      if (signal === 'SIGINT') {
        expect(stopped.code).toBe(130);
        expect(stopped.stderr).toMatch(/interrupted by SIGINT; finished tasks are kept/);
      } else {
        expect(stopped.code).toBe(null);
      }
      const kept = resultLines(out).map(idOf);
      expect(kept.length).toBeGreaterThanOrEqual(2);
      expect(kept.length).toBeLessThan(8);

      const rerun = await runCli([...base(), path, '--out', out, '--concurrency', '2', '--json']);
      expect(rerun.code, rerun.stderr).toBe(0);
      expect(JSON.parse(rerun.stdout)).toMatchObject({ tasks: 8, completed: 8 });
      const ids = resultLines(out).map(idOf);
      expect(new Set(ids).size).toBe(8);
      expect(ids).toHaveLength(8);
      // A task finished before the stop was started once in all.
      for (const id of kept) expect(firstTurnsOf(needleTask(Number(id.slice(1)), SENTENCES).question, since), id).toBe(1);
      expect(readFileSync(out, 'utf8').endsWith('\n')).toBe(true);
    });
  }
});

describe('the batch command', () => {
  it('dispatches `batch generate ...` to a subcommand, with its own --out, and anything else to the tasks file action', async () => {
    const io = { stdout: process.stdout, stderr: process.stderr, env: {}, readStdin: async () => Buffer.alloc(0), interrupt: new AbortController().signal };
    // The bundle gets the version at build time; this test imports the source.
    (globalThis as { __RLM_VERSION__?: string }).__RLM_VERSION__ = '0.0.0-test';
    const program = buildProgram(io, () => {});
    const batch = program.commands.find((command) => command.name() === 'batch')!;
    const generated: unknown[] = [];
    batch
      .command('generate')
      .argument('<kind>')
      .option('--out <file>')
      .action((kind: string, flags: { out: string }) => void generated.push([kind, flags.out]));
    await program.parseAsync(['batch', 'generate', 'sniah', '--out', 'tasks.jsonl'], { from: 'user' });
    expect(generated).toEqual([['sniah', 'tasks.jsonl']]);
    // The default action: a tasks file, here without --out, which it asks for.
    await expect(program.parseAsync(['batch', 'tasks.jsonl'], { from: 'user' })).rejects.toThrow(/Give the results file with --out/);
  });
});
