import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOpenAIServer, type FakeOpenAIServer } from '../../src/testing.js';
import { eventually, workerPids } from '../processes.js';
import { repl } from '../repl.js';
import { sawOutput } from '../server/helpers.js';
import { BIN, codeThenFinal, runCli, scratch, scratchFile } from './helpers.js';

const RUNS = 6;
let upstream: FakeOpenAIServer;
let subCalls = 0;
beforeAll(async () => {
  upstream = await startFakeOpenAIServer({
    reply: (request) => {
      // Every run's block waits on a slow sub-call: all runs hold their sandbox at once.
      const messages = request.body.messages as { content?: unknown }[];
      if (messages.length === 1 && messages[0]!.content === 'wait') return (subCalls++, { content: 'ok', delayMs: 1_500 });
      return sawOutput(request) ? 'FINAL(done)' : repl('print(llm_query("wait"))');
    },
  });
});
afterAll(() => upstream.close());

/** Worker processes `rlm serve --isolation MODE` has while RUNS completions are mid-block. */
async function workersDuringConcurrentRuns(isolation: string): Promise<number> {
  const child = spawn(process.execPath, [BIN, 'serve', '--base-url', upstream.baseURL, '--port', '0', '--isolation', isolation], {
    env: { PATH: process.env.PATH ?? '', HOME: scratch },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  try {
    let stderr = '';
    const url = await new Promise<string>((resolve, reject) => {
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
        const match = /serving an OpenAI-compatible API at (\S+)\/v1/.exec(stderr);
        if (match) resolve(match[1]!);
      });
      child.on('exit', () => reject(new Error(`rlm serve exited: ${stderr}`)));
    });
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const before = subCalls;
    const runs = Array.from({ length: RUNS }, () => client.chat.completions.create({ model: 'rlm', messages: [{ role: 'user', content: 'q' }] }));
    expect(await eventually(() => subCalls - before >= RUNS, 15_000)).toBe(true);
    const workers = workerPids(child.pid).length;
    for (const completion of await Promise.all(runs)) expect(completion.choices[0]!.message.content).toBe('done');
    return workers;
  } finally {
    child.kill('SIGKILL');
  }
}

describe('--isolation', () => {
  it('isolate (the default): concurrent runs share at most one worker process per core', async () => {
    expect(await workersDuringConcurrentRuns('isolate')).toBeLessThanOrEqual(Math.min(availableParallelism(), 8));
  }, 40_000);

  it('process: each concurrent run has a worker process of its own', async () => {
    expect(await workersDuringConcurrentRuns('process')).toBeGreaterThanOrEqual(RUNS);
  }, 40_000);

  it('refuses a mode it does not know', async () => {
    const result = await runCli(['run', '--base-url', upstream.baseURL, '--context', scratchFile('iso.txt', 'x'), '--isolation', 'thread', 'q']);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/--isolation.*thread.*isolate, process/s);
  });

  it('rlm run --isolation process answers as the default does', async () => {
    const local = await startFakeOpenAIServer({ reply: codeThenFinal('print(6 * 7)') });
    try {
      const result = await runCli(['run', '--base-url', local.baseURL, '--isolation', 'process', '--context', scratchFile('iso2.txt', 'x'), 'q']);
      expect(result.stdout.trim()).toBe('42');
      expect(result.code).toBe(0);
    } finally {
      await local.close();
    }
  });
});
