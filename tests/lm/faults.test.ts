import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/paths.js';
import { ModelError, OpenAIModel } from '../../src/index.js';
import { startFakeOpenAIServer, type FakeOpenAIServer, type FakeReply } from '../../src/testing.js';
import { rejectionOf } from '../rejection.js';
import { repl } from '../repl.js';

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

const execFileAsync = promisify(execFile);
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
    const { server, ask } = await modelFacing([{ fault: 'stall-after-headers' }, 'recovered'], { stream, idleTimeoutMs: 1_000 });
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
    const runOver = new Error('run over');
    // Any moment of the 20 s wait will do: this one is well inside it.
    setTimeout(() => controller.abort(runOver), 300);
    const started = Date.now();
    expect(await rejectionOf(ask(controller.signal), Error)).toBe(runOver);
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
    const cut: FakeReply = { fault: 'stream-cut', content: repl('print(1)') };
    const { server, ask } = await modelFacing([cut, cut, cut], { stream: true });
    expect((await failure(ask())).message).toBe("The model's reply stream ended early: the connection closed before the reply was complete (3 attempts).");
    expect(server.requests).toHaveLength(3);
  });

  it('takes a stream cut in the middle of an event as cut', async () => {
    const { ask } = await modelFacing([{ fault: 'stream-cut-mid-event' }, 'whole'], { stream: true });
    expect((await ask()).content).toBe('whole');
  });

  // A finish reason followed by a clean close is a whole reply, as the official client takes it.
  it('takes a stream that gave its finish reason and closed cleanly without [DONE] as complete', async () => {
    const { server, ask } = await modelFacing([{ fault: 'stream-no-done', content: 'all of it' }, 'not needed'], { stream: true });
    expect((await ask()).content).toBe('all of it');
    expect(server.requests).toHaveLength(1);
  });

  it('takes a stream that closed cleanly before its finish reason as cut, and retries it', async () => {
    const { server, ask } = await modelFacing([{ fault: 'stream-closed-early', content: 'half of this' }, 'whole'], { stream: true });
    expect((await ask()).content).toBe('whole');
    expect(server.requests).toHaveLength(2);
  });

  it('says a stream closed before its finish reason ended early', async () => {
    const { ask } = await modelFacing([{ fault: 'stream-closed-early' }], { stream: true, maxRetries: 0 });
    expect((await failure(ask())).message).toBe("The model's reply stream ended early, without a finish reason or the [DONE] marker.");
  });

  // The openai client logs a line it cannot parse with console.error (through a logger it caches
  // on first use, so only a fresh process shows it): rlm reads the stream itself.
  it('prints nothing of a malformed SSE line on stderr', async () => {
    const script = `
      const { OpenAIModel } = await import(${JSON.stringify(join(packageRoot(), 'dist', 'index.js'))});
      const { startFakeOpenAIServer } = await import(${JSON.stringify(join(packageRoot(), 'dist', 'testing.js'))});
      const server = await startFakeOpenAIServer({ replies: [{ fault: 'malformed-json' }, 'whole'] });
      const model = new OpenAIModel({ baseURL: server.baseURL, stream: true, maxRetryDelayMs: 1 });
      console.log((await model.chat({ model: 'm', messages: [{ role: 'user', content: 'q' }] })).content);
      await server.close();
    `;
    const { stdout, stderr } = await execFileAsync(process.execPath, ['--input-type=module', '-e', script]);
    expect(stdout).toBe('whole\n');
    expect(stderr).toBe('');
  });
});

describe.each([false, true])('transient failures are retried (stream: %s)', (stream) => {
  it.each<[string, FakeReply]>([
    ['a 200 carrying a server error', { fault: 'error-body', content: 'upstream overloaded' }],
    ['a 200 with empty choices', { fault: 'empty-choices' }],
    ['a malformed body', { fault: 'malformed-json' }],
    ['a reply cut in transit', { fault: 'stream-cut' }],
    ['a 200 error whose type is not a client error', { fault: 'error-body', error: { message: 'busy', type: 'overloaded_error', code: 'upstream_timeout' } }],
    ['a 200 error with a numeric code 503', { fault: 'error-body', error: { message: 'busy', code: 503 } }],
  ])('retries %s, and answers', async (_name, fault) => {
    const { server, ask } = await modelFacing([fault, 'the answer'], { stream });
    expect((await ask()).content).toBe('the answer');
    expect(server.requests).toHaveLength(2);
  });

  it('says a malformed body was not valid JSON, not that the connection closed', async () => {
    const { ask } = await modelFacing([{ fault: 'malformed-json' }, { fault: 'malformed-json' }], { stream, maxRetries: 1 });
    expect((await failure(ask())).message).toMatch(/^Model request failed after 2 attempts: the reply was not valid JSON \(it begins: "\{/);
  });

  // A server that accepts the connection and never answers used to hold each attempt for the whole
  // request timeout (600 s by default) when the reply was JSON.
  it('cuts a server that never sends headers after the idle timeout, and retries', async () => {
    const { server, ask } = await modelFacing([{ fault: 'silent' }, 'answered'], { stream, idleTimeoutMs: 1_000 });
    expect((await ask()).content).toBe('answered');
    expect(server.requests).toHaveLength(2);
  });

  it('names the idle timeout when no headers ever come', async () => {
    const { ask } = await modelFacing([{ fault: 'silent' }], { stream, idleTimeoutMs: 1_000, maxRetries: 0 });
    expect((await failure(ask())).message).toBe('Model request failed: the server did not answer: no response headers within 1 s (the idle timeout).');
  });
});

describe.each([false, true])('client errors fail at once (stream: %s)', (stream) => {
  it.each<[string, FakeReply]>([
    ['an invalid_request_error type', { fault: 'error-body', error: { message: 'messages: required', type: 'invalid_request_error' } }],
    ['a numeric code 400', { fault: 'error-body', error: { message: 'bad input', code: 400 } }],
    ['an authentication error', { fault: 'error-body', error: { message: 'bad key', type: 'authentication_error' } }],
  ])('does not retry a 200 carrying %s', async (_name, fault) => {
    const { server, ask } = await modelFacing([fault, 'never sent'], { stream });
    const error = await failure(ask());
    expect(error.message).toMatch(/^The model server answered with an error: /);
    expect(error.retriable).toBe(false);
    expect(server.requests).toHaveLength(1);
  });

  it.each([400, 401, 403, 404, 422])('does not retry HTTP %i', async (status) => {
    const { server, ask } = await modelFacing([{ status, error: { message: 'no' } }, 'never sent'], { stream });
    expect((await failure(ask())).status).toBe(status);
    expect(server.requests).toHaveLength(1);
  });

  it('does not retry a reply the content filter stopped, and says so', async () => {
    const { server, ask } = await modelFacing([{ content: 'The first half', finishReason: 'content_filter' }, 'never sent'], { stream });
    expect((await failure(ask())).message).toBe(
      "The model server's content filter withheld the reply (finish reason: content_filter): rephrase the query, or use another model.",
    );
    expect(server.requests).toHaveLength(1);
  });
});

describe("the fake server's fault rate", () => {
  it('draws faults per request, the same ones for the same seed, without using up scripted replies', async () => {
    const draws = async () => {
      const replies = Array.from({ length: 20 }, (_, index) => `reply ${index}`);
      const server = await startFakeOpenAIServer({ replies, faultRate: 0.3, seed: 7, faults: [{ status: 500 }, { fault: 'empty-choices' }] });
      servers.push(server);
      const model = new OpenAIModel({ baseURL: server.baseURL, maxRetries: 10, maxRetryDelayMs: 1 });
      const answers: string[] = [];
      for (let index = 0; index < 20; index++) answers.push((await model.chat({ model: 'm', messages: [{ role: 'user', content: 'q' }] })).content!);
      return { answers, replies, faults: server.faultsInjected, requests: server.requests.length };
    };
    const first = await draws();
    expect(first.answers).toEqual(first.replies);
    const injected = Object.values(first.faults).reduce((sum, count) => sum + count, 0);
    expect(injected).toBeGreaterThan(0);
    expect(first.requests).toBe(20 + injected);
    expect((await draws()).faults).toEqual(first.faults);
  });
});
