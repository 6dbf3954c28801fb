import { afterEach, describe, expect, it } from 'vitest';
import { ModelError, OpenAIModel } from '../../src/index.js';
import { startFakeOpenAIServer, type FakeOpenAIServer, type FakeReply } from '../../src/testing.js';
import { rejectionOf } from '../rejection.js';

// The real openai client over real HTTP against a server that misbehaves on purpose.

const servers: FakeOpenAIServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

async function modelFacing(replies: FakeReply[], options: { stream: boolean; maxRetries?: number; idleTimeoutMs?: number; timeoutMs?: number; maxRetryDelayMs?: number }) {
  const server = await startFakeOpenAIServer({ replies });
  servers.push(server);
  const model = new OpenAIModel({ baseURL: server.baseURL, maxRetryDelayMs: 10, maxRetries: 2, ...options });
  return { server, ask: (signal?: AbortSignal) => model.chat({ model: 'm', messages: [{ role: 'user', content: 'q' }], ...(signal && { signal }) }) };
}

const failure = (promise: Promise<unknown>) => rejectionOf(promise, ModelError);

describe.each([false, true])('replies that are not answers (stream: %s)', (stream) => {
  it('takes an empty reply as an error, never as an answer', async () => {
    const { ask } = await modelFacing([{ fault: 'null-content' }], { stream, maxRetries: 0 });
    expect((await failure(ask())).message).toMatch(/empty reply/);
  });

  it('takes a reply with no choices as an error', async () => {
    const { ask } = await modelFacing([{ fault: 'empty-choices' }], { stream, maxRetries: 0 });
    expect((await failure(ask())).message).toMatch(/returned no choices/);
  });

  it('cuts a response that stalls after its headers, and retries it', async () => {
    const { server, ask } = await modelFacing([{ fault: 'stall-after-headers' }, 'recovered'], { stream, idleTimeoutMs: 300 });
    const started = Date.now();
    expect((await ask()).content).toBe('recovered');
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(server.requests).toHaveLength(2);
  });

  it('gives up on a silent server after the total timeout of each attempt', async () => {
    const { server, ask } = await modelFacing([{ fault: 'silent' }, { fault: 'silent' }], { stream, timeoutMs: 300, maxRetries: 1 });
    const error = await failure(ask());
    expect(error.message).toMatch(/^Model request failed after 2 attempts: no complete response within 300 ms \(the request timeout\)\.$/);
    expect(server.requests).toHaveLength(2);
  });

  it('retries a connection that drops', async () => {
    const { ask } = await modelFacing([{ fault: 'drop' }, 'after the drop'], { stream });
    expect((await ask()).content).toBe('after the drop');
  });

  it('waits for retry-after, but never after the caller gives up', async () => {
    const { ask } = await modelFacing([{ status: 429, headers: { 'retry-after': '20' } }, 'late'], { stream, maxRetryDelayMs: 60_000 });
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('run over')), 300);
    const started = Date.now();
    await expect(ask(controller.signal)).rejects.toThrow('run over');
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});

describe('malformed but common shapes (JSON)', () => {
  it('shows the message of an error sent with status 200', async () => {
    const { ask } = await modelFacing([{ fault: 'error-body', content: 'the model is overloaded, try later' }], { stream: false, maxRetries: 0 });
    expect((await failure(ask())).message).toBe('The model server answered with an error: the model is overloaded, try later');
  });

  it('names a 200 body without choices', async () => {
    const { ask } = await modelFacing([{ fault: 'no-choices' }], { stream: false, maxRetries: 0 });
    expect((await failure(ask())).message).toBe('The model server answered with an error: the reply has no "choices"');
  });

  it('caps how long it waits before a retry', async () => {
    const { ask } = await modelFacing([{ status: 503, headers: { 'retry-after': '30' } }, 'soon'], { stream: false, maxRetryDelayMs: 100 });
    const started = Date.now();
    expect((await ask()).content).toBe('soon');
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});

describe('streams that end early (SSE)', () => {
  it('retries a stream cut before its finish reason, and succeeds', async () => {
    const { server, ask } = await modelFacing([{ fault: 'stream-cut', content: 'half of this' }, 'whole answer'], { stream: true });
    expect((await ask()).content).toBe('whole answer');
    expect(server.requests).toHaveLength(2);
  });

  it('fails, after retries, when every attempt is cut', async () => {
    const cut: FakeReply = { fault: 'stream-cut', content: '```repl\nprint(1)\n```' };
    const { server, ask } = await modelFacing([cut, cut, cut], { stream: true });
    expect((await failure(ask())).message).toBe("The model's reply stream ended early: the connection closed before the reply was complete (3 attempts).");
    expect(server.requests).toHaveLength(3);
  });

  it('takes a stream cut in the middle of an event as cut', async () => {
    const { ask } = await modelFacing([{ fault: 'stream-cut-mid-event' }, 'whole'], { stream: true });
    expect((await ask()).content).toBe('whole');
  });

  it('takes a stream without [DONE] as cut', async () => {
    const { server, ask } = await modelFacing([{ fault: 'stream-no-done' }, 'whole'], { stream: true });
    expect((await ask()).content).toBe('whole');
    expect(server.requests).toHaveLength(2);
  });

  it('skips chunks that carry only usage', async () => {
    const { ask } = await modelFacing([{ fault: 'usage-chunks', content: 'the answer' }], { stream: true, maxRetries: 0 });
    const reply = await ask();
    expect(reply.content).toBe('the answer');
    expect(reply.usage.inputTokens).toBeGreaterThan(0);
  });
});
