import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { ConfigurationError, serve } from '../../src/index.js';
import { deferred } from '../deferred.js';
import { eventually, workerPids } from '../processes.js';
import { closedPort } from '../cli/helpers.js';
import { rejectionOf } from '../rejection.js';
import { repl } from '../repl.js';
import { tempFolder } from '../temp-folder.js';
import { keepAlives, rlmApp, rlmServer, runEnded, sawOutput, tapped } from './helpers.js';

// Answers that need no socket come from the app in process (hono's app.request); cancellation on
// disconnect, keep-alive through proxies and load go over a real port.

describe('bad input gets an OpenAI error object with the right status', () => {
  it('malformed JSON, missing or empty messages, unknown roles', async () => {
    const { post } = await rlmApp({ root: ['FINAL(x)'] });
    const malformed = await post('{"model": "root", "messages": [');
    expect(malformed.status).toBe(400);
    expect(malformed.body.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_json' });
    const missing = await post(JSON.stringify({ model: 'root' }));
    expect(missing.status).toBe(400);
    expect(missing.body.error.param).toBe('messages');
    const empty = await post(JSON.stringify({ model: 'root', messages: [] }));
    expect(empty.status).toBe(400);
    expect(empty.body.error.message).toContain('at least one message');
    const role = await post(JSON.stringify({ model: 'root', messages: [{ role: 'wizard', content: 'hi' }] }));
    expect(role.status).toBe(400);
    expect(role.body.error.message).toMatch(/unknown role/);
  });

  it('a body that is JSON but not an object, and n > 1: 400 that says so', async () => {
    const { post, upstream } = await rlmApp({ root: ['FINAL(x)'] });
    const array = await post(JSON.stringify([{ model: 'root', messages: [{ role: 'user', content: 'q' }] }]));
    expect(array.status).toBe(400);
    expect(array.body.error.message).toContain('The body must be a JSON object');
    expect(array.body.error.message).toContain('not an array');
    for (const stream of [false, true]) {
      const many = await post(JSON.stringify({ model: 'root', n: 2, stream, messages: [{ role: 'user', content: 'q' }] }));
      expect(many.status).toBe(400);
      expect(many.body.error).toMatchObject({ type: 'invalid_request_error', param: 'n', message: 'Invalid request: n: rlm answers with one choice: n must be 1 (or left out)' });
    }
    expect(upstream.requests).toHaveLength(0);
  });

  it('GET /v1/models when the upstream does not answer: 502, not an empty list', async () => {
    const { server, upstream } = await rlmServer({ root: ['FINAL(x)'], models: ['root'] });
    expect(((await (await fetch(`${server.url}/v1/models`)).json()) as { data: { id: string }[] }).data.map((model) => model.id)).toEqual(['root']);
    const down = await serve({ port: 0, run: { baseURL: `http://127.0.0.1:${await closedPort()}/v1` } });
    try {
      const response = await fetch(`${down.url}/v1/models`);
      expect(response.status).toBe(502);
      const { error } = (await response.json()) as { error: { type: string; message: string } };
      expect(error.type).toBe('upstream_error');
      expect(error.message).toMatch(/^The upstream model server did not list its models \(http:\/\/127\.0\.0\.1:\d+\/v1\/models\): connection refused \(is it running\?\)\.$/);
    } finally {
      await down.close();
    }
    expect(upstream.requests).toHaveLength(0);
  });

  it('a body over the limit: 413', async () => {
    const { post } = await rlmApp({ root: ['FINAL(x)'] }, { maxBodyBytes: 10_000 });
    const big = await post(JSON.stringify({ model: 'root', messages: [{ role: 'user', content: 'x'.repeat(20_000) }] }));
    expect(big.status).toBe(413);
    expect(big.body.error.code).toBe('request_too_large');
  });

  it('a missing or wrong token: 401', async () => {
    const { app, post } = await rlmApp({ root: ['FINAL(x)'] }, { authToken: 'right-token' });
    const body = JSON.stringify({ model: 'root', messages: [{ role: 'user', content: 'q' }] });
    expect((await post(body)).status).toBe(401);
    expect((await post(body, { authorization: 'Bearer wrong' })).status).toBe(401);
    const models = await app.request('/v1/models', { headers: { authorization: 'Bearer right-token' } });
    expect(models.status).toBe(200);
  });

  it('refuses to listen off loopback without a token, and says why', async () => {
    const refused = await rejectionOf(serve({ host: '0.0.0.0', port: 0, run: { baseURL: 'http://127.0.0.1:9/v1' } }), ConfigurationError);
    expect(refused.code).toBe('configuration_error');
    expect(refused.message).toMatch(/Refusing to serve on 0\.0\.0\.0 without a token/);
  });

  it('more runs than the cap: 429 with retry-after', async () => {
    const firstAsked = deferred();
    const answer = deferred();
    const slowRoot = async () => {
      firstAsked.resolve();
      await answer.promise;
      return repl('FINAL("slow")');
    };
    const { client, post } = await rlmApp({ root: slowRoot }, { maxConcurrentRuns: 1 });
    const first = client.chat.completions.create({ model: 'root', messages: [{ role: 'user', content: 'q' }] });
    await firstAsked.promise; // the first run holds the only slot until its root model answers
    const second = await post(JSON.stringify({ model: 'root', messages: [{ role: 'user', content: 'q' }] }));
    expect(second.status).toBe(429);
    expect(second.headers.get('retry-after')).toBe('1');
    answer.resolve();
    expect((await first).choices[0]!.message.content).toBe('slow');
  });
});

describe('the wire format', () => {
  it('frames SSE as OpenAI does: data lines, tool call deltas with index, id and name first, [DONE]', async () => {
    const { app } = await rlmApp({ root: [{ content: null, toolCalls: [{ id: 'u1', name: 'lookup', arguments: { key: 'k'.repeat(1_500) } }] }] });
    const response = await app.request('/v1/chat/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'root', stream: true, messages: [{ role: 'user', content: 'q' }], tools: [{ type: 'function', function: { name: 'lookup' } }] }),
    });
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const text = await response.text();
    const events = text.split('\n\n').filter((event) => event.trim() !== '');
    for (const event of events) expect(event).toMatch(/^data: /);
    expect(events.at(-1)).toBe('data: [DONE]');
    const chunks = events.slice(0, -1).map((event) => JSON.parse(event.slice('data: '.length)));
    expect(chunks[0].choices[0].delta).toEqual({ role: 'assistant', content: '' });
    const calls = chunks.flatMap((chunk) => chunk.choices[0]?.delta.tool_calls ?? []);
    expect(calls[0]).toMatchObject({ index: 0, id: expect.stringMatching(/^call_/), type: 'function', function: { name: 'lookup', arguments: '' } });
    expect(calls.slice(1).every((piece: { index: number; id?: string }) => piece.index === 0 && piece.id === undefined)).toBe(true);
    expect(calls.map((piece: { function: { arguments: string } }) => piece.function.arguments).join('')).toBe(JSON.stringify({ key: 'k'.repeat(1_500) }));
    expect(chunks.at(-1).choices[0].finish_reason).toBe('tool_calls');
  });
});

describe('keep-alive', () => {
  it('sends comment lines while a streamed run works, which the openai client ignores', async () => {
    // Each streamed run's first root call answers only once its caller has read two keep-alive lines.
    const held = [deferred(), deferred()];
    let rootCallsWaiting = 0;
    const heldRoot = async (request: Parameters<typeof sawOutput>[0]) => {
      if (sawOutput(request)) return 'FINAL(after a wait)';
      await held[rootCallsWaiting++]!.promise;
      return repl('print(1)');
    };
    const { server } = await rlmServer({ root: heldRoot }, { keepAliveMs: 100 });
    const body = JSON.stringify({ model: 'root', stream: true, messages: [{ role: 'user', content: 'q' }] });
    const response = await fetch(`${server.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const raw = await tapped(response, (text) => keepAlives(text) >= 2 && held[0]!.resolve()).text();
    expect(keepAlives(raw)).toBeGreaterThanOrEqual(2);
    expect(raw).toContain('after a wait');
    let seenByClient = '';
    const client = new OpenAI({
      baseURL: `${server.url}/v1`,
      apiKey: 'not-needed',
      maxRetries: 0,
      fetch: async (url, init) =>
        tapped(await fetch(url, init), (text) => {
          seenByClient = text;
          if (keepAlives(text) >= 2) held[1]!.resolve();
        }),
    });
    const stream = await client.chat.completions.create({ model: 'root', messages: [{ role: 'user', content: 'q' }], stream: true });
    let content = '';
    for await (const chunk of stream) content += chunk.choices[0]?.delta.content ?? '';
    expect(keepAlives(seenByClient)).toBeGreaterThanOrEqual(2);
    expect(content).toBe('after a wait');
  });
});

describe('load and cancellation', () => {
  it('answers 50 concurrent completions without errors, and leaves no sandbox behind', async () => {
    const { client, rootRequests } = await rlmServer({ root: (request) => (sawOutput(request) ? 'FINAL(ok)' : repl('print(1)')) }, { maxConcurrentRuns: 64 });
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, index) => client.chat.completions.create({ model: 'root', messages: [{ role: 'user', content: `question ${index}` }] })),
    );
    expect(answers.map((answer) => answer.choices[0]!.message.content)).toEqual(Array(50).fill('ok'));
    expect(rootRequests).toHaveLength(100); // two root calls each: code, then the answer
    // Only the pool's warm spares remain once every run's sandbox has stopped.
    expect(await eventually(() => workerPids().length <= 5, 10_000)).toBe(true);
  }, 60_000);

  it('cancels the run of a client that disconnects', async () => {
    const logDir = tempFolder('rlm-disconnect-');
    // The root model would take 10 s: a run still going after the disconnect would not end soon.
    const { server, rootRequests } = await rlmServer({ root: () => ({ content: repl('print(1)'), delayMs: 10_000 }) }, { run: { logDir } });
    const controller = new AbortController();
    const request = fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'root', messages: [{ role: 'user', content: 'q' }] }),
      signal: controller.signal,
    }).catch((error: unknown) => error);
    expect(await eventually(() => rootRequests.length === 1, 10_000)).toBe(true);
    controller.abort();
    await request;
    expect(await eventually(() => runEnded(logDir), 5_000)).toBe(true);
    expect(rootRequests).toHaveLength(1);
    const health = (await (await fetch(`${server.url}/health`)).json()) as { running: number };
    expect(health.running).toBe(0);
  });
});

describe('model names', () => {
  it('splits root:sub, and never a name the upstream lists whole', async () => {
    const seen: string[] = [];
    const { client, upstream } = await rlmServer({
      models: ['root', 'sub', 'qwen2.5:7b'],
      root: [repl('print(llm_query("hi"))'), 'FINAL(a)', repl('print(1)'), 'FINAL(b)'],
      sub: (prompt) => {
        seen.push(prompt);
        return 'sub says hi';
      },
    });
    await client.chat.completions.create({ model: 'root:sub', messages: [{ role: 'user', content: 'q' }] });
    expect(upstream.requests.map((request) => request.body.model)).toEqual(['root', 'sub', 'root']);
    expect(seen).toEqual(['hi']);
    await client.chat.completions.create({ model: 'qwen2.5:7b', messages: [{ role: 'user', content: 'q' }] });
    // The whole name was the root model (and, with no sub model named, the sub model too).
    expect(new Set(upstream.requests.slice(3).map((request) => request.body.model))).toEqual(new Set(['qwen2.5:7b']));
  });
});
