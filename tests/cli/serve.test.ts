import { spawn, type ChildProcess } from 'node:child_process';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOpenAIServer, type FakeOpenAIServer } from '../../src/testing.js';
import { eventually } from '../processes.js';
import { sawOutput } from '../server/helpers.js';
import { BIN, runCli, scratch } from './helpers.js';
import { repl } from '../repl.js';

let upstream: FakeOpenAIServer;
beforeAll(async () => {
  upstream = await startFakeOpenAIServer({
    reply: (request) => (sawOutput(request) ? 'FINAL(served)' : { content: repl('print(1)'), delayMs: 300 }),
  });
});
afterAll(() => upstream.close());

describe('rlm serve', () => {
  it('serves chat completions, and on SIGTERM lets the request in progress finish before it stops', async () => {
    const { child, url, stderr: output } = await startServe([]);
    const stderr = () => output.text;
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const asked = upstream.requests.length;
    const inProgress = client.chat.completions.create({ model: 'root', messages: [{ role: 'user', content: 'q' }] });
    // The request is in progress once the run has asked the upstream (whose reply takes 300 ms).
    expect(await eventually(() => upstream.requests.length > asked, 10_000)).toBe(true);
    child.kill('SIGTERM');
    expect((await inProgress).choices[0]!.message.content).toBe('served');
    expect(await exited).toBe(0);
    expect(stderr()).toContain('rlm: shutting down: no new requests');
    expect(stderr()).toContain('rlm: stopped.');
  });

  it('serves the Responses API in the background, and forgets finished responses after --response-ttl', async () => {
    const { child, url } = await startServe(['--response-ttl', '0.5']);
    try {
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
      const queued = await client.responses.create({ model: 'root', input: 'q', background: true });
      expect(queued.status).toBe('queued');
      const completed = async () => (await client.responses.retrieve(queued.id)).status === 'completed';
      expect(await eventually(completed, 10_000)).toBe(true);
      expect((await client.responses.retrieve(queued.id)).output_text).toBe('served');
      const forgotten = () => client.responses.retrieve(queued.id).then(() => false, (error: unknown) => error instanceof OpenAI.NotFoundError);
      expect(await eventually(forgotten, 10_000)).toBe(true);
    } finally {
      child.kill('SIGTERM');
    }
  });

  it('refuses to listen on every interface without a token (exit 2)', async () => {
    const result = await runCli(['serve', '--base-url', upstream.baseURL, '--host', '0.0.0.0', '--port', '0']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('Refusing to serve on 0.0.0.0 without a token');
    expect(result.stderr).toContain('--auth-token');
  });
});

/** `rlm serve` with `args` against the fake upstream, once it says where it listens. */
async function startServe(args: string[]): Promise<{ child: ChildProcess; url: string; stderr: { text: string } }> {
  const child = spawn(process.execPath, [BIN, 'serve', '--base-url', upstream.baseURL, '--port', '0', ...args], {
    env: { PATH: process.env.PATH ?? '', HOME: scratch },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const stderr = { text: '' };
  const url = await new Promise<string>((resolve, reject) => {
    child.stderr.on('data', (chunk: Buffer) => {
      stderr.text += chunk.toString();
      const match = /serving an OpenAI-compatible API at (\S+)\/v1/.exec(stderr.text);
      if (match) resolve(match[1]!);
    });
    child.on('exit', () => reject(new Error(`rlm serve exited: ${stderr.text}`)));
  });
  return { child, url, stderr };
}

describe('rlm serve on a port in use', () => {
  it('exits 2 and says to pick another port, without a stack trace', async () => {
    const taken = await startFakeOpenAIServer();
    try {
      const port = new URL(taken.baseURL).port;
      const result = await runCli(['serve', '--base-url', upstream.baseURL, '--port', port]);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(`port ${port} is in use; pick one with --port`);
      expect(result.stderr).not.toMatch(/\n\s+at /);
    } finally {
      await taken.close();
    }
  });
});
