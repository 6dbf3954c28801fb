import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import type { FakeReply } from '../../src/testing.js';
import { deferred } from '../deferred.js';
import { eventually } from '../processes.js';
import { rejectionOf } from '../rejection.js';
import { repl } from '../repl.js';
import { tempFolder } from '../temp-folder.js';
import { keepAlives, rlmApp, rlmServer, runEnded, sawOutput, tapped } from './helpers.js';

// The Responses API's edges: bad input, the SSE wire format, keep-alive, disconnects and the run
// cap. Answers that need no socket come from the app in process; disconnects go over a real port.

const lookupTool = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: {} } };
const rootCalls = (...names: string[]): FakeReply => ({ content: null, toolCalls: names.map((name, index) => ({ id: `u${index}`, name, arguments: { key: 'k'.repeat(1_500) } })) });

describe('bad input to POST /v1/responses gets an OpenAI error object', () => {
  it.each([
    ['malformed JSON', '{"model": "root", "input": [', null, /not valid JSON/],
    ['no input', { model: 'root' }, 'input', /input must be a string or an array of items/],
    ['an empty input list', { model: 'root', input: [] }, 'input', /at least one item/],
    ['an unknown item type', { model: 'root', input: [{ type: 'computer_call' }] }, 'input.0.type', /unknown type: use message, function_call or function_call_output/],
    ['an unknown role', { model: 'root', input: [{ role: 'wizard', content: 'hi' }] }, 'input.0.role', /user, assistant, system or developer/],
    ['a last item that is no question', { model: 'root', input: [{ role: 'assistant', content: 'hi' }] }, 'input', /the last input item must be the user's question .* got a assistant message/],
    ['a tool that is not a function', { model: 'root', input: 'q', tools: [{ type: 'web_search' }] }, 'tools.0.type', /only the caller's function tools/],
    ['background without store', { model: 'root', input: 'q', background: true, store: false }, 'store', /a background response must be stored to be polled/],
    ['previous_response_id with a new question', { model: 'root', input: 'and then?', previous_response_id: 'resp_x' }, 'previous_response_id', /send the whole conversation as input/],
    ['a schema that cannot be used', { model: 'root', input: 'q', text: { format: { type: 'json_schema', name: 'x', schema: { type: 'no-such-type' } } } }, 'text.format.schema', /output JSON Schema cannot be used/],
  ])('%s: 400 naming the field', async (_label, body, param, message) => {
    const { post, upstream } = await rlmApp({ root: ['FINAL(never asked)'] });
    const { status, body: answer } = await post(typeof body === 'string' ? body : JSON.stringify(body), {}, '/v1/responses');
    expect(status).toBe(400);
    expect(answer.error).toMatchObject({ type: 'invalid_request_error', param });
    expect(answer.error.message).toMatch(message);
    expect(upstream.requests).toHaveLength(0);
  });

  it('function_call_output for no paused run: 404; results missing for some calls: 400 that says what to send', async () => {
    const { client } = await rlmApp({ root: [rootCalls('lookup', 'lookup')] });
    const unknown = await rejectionOf(client.responses.create({ model: 'root', input: [{ type: 'function_call_output', call_id: 'call_nope', output: 'r' }] }), OpenAI.NotFoundError);
    expect(unknown).toMatchObject({ code: 'tool_call_not_found', param: 'input' });
    expect(unknown.message).toContain('No paused run is waiting for tool call call_nope');
    expect(unknown.message).toContain('Send the input again without its function_call_output items to start over.');
    const first = await client.responses.create({ model: 'root', input: 'q', tools: [{ ...lookupTool, type: 'function', strict: false }] });
    const [one] = first.output.filter((item) => item.type === 'function_call');
    const missing = await rejectionOf(client.responses.create({ model: 'root', previous_response_id: first.id, input: [{ type: 'function_call_output', call_id: one!.call_id, output: 'r' }] }), OpenAI.BadRequestError);
    expect(missing.code).toBe('tool_results_missing');
    expect(missing.message).toMatch(/Tool results are missing for call_\w+: send one function_call_output item per function call\./);
  });

  it('an unknown response id: 404; cancelling a foreground response or streaming from a bad point: 400', async () => {
    const { client, app } = await rlmApp({ root: [repl('print(1)'), 'FINAL(x)'] });
    expect(await rejectionOf(client.responses.retrieve('resp_nope'), OpenAI.NotFoundError)).toMatchObject({ code: 'response_not_found', param: 'response_id' });
    expect(await rejectionOf(client.responses.cancel('resp_nope'), OpenAI.NotFoundError)).toMatchObject({ code: 'response_not_found' });
    const foreground = await client.responses.create({ model: 'root', input: 'q' });
    expect(await rejectionOf(client.responses.cancel(foreground.id), OpenAI.BadRequestError)).toMatchObject({ code: 'not_background', message: expect.stringContaining('Only background responses can be cancelled') });
    const badPoint = await app.request(`/v1/responses/${foreground.id}?stream=true&starting_after=soon`);
    expect(badPoint.status).toBe(400);
    expect(((await badPoint.json()) as { error: { param: string } }).error.param).toBe('starting_after');
  });
});

/** The events of a raw Responses SSE body: each `event:` line's name and its `data:` line parsed. */
function sseEvents(text: string): { name: string; data: { type: string; sequence_number: number; [field: string]: unknown } }[] {
  const blocks = text.split('\n\n').filter((block) => block.trim() !== '' && !block.startsWith(':'));
  return blocks.map((block) => {
    const match = /^event: (\S+)\ndata: (.*)$/.exec(block);
    if (!match) throw new Error(`not an SSE event with a name and one data line: ${block}`);
    return { name: match[1]!, data: JSON.parse(match[2]!) };
  });
}

describe('the Responses wire format', () => {
  it('frames SSE as OpenAI does: a named event per line pair, numbered, function call arguments in deltas, no [DONE]', async () => {
    const { app } = await rlmApp({ root: [rootCalls('lookup')] });
    const response = await app.request('/v1/responses', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'root', stream: true, input: 'q', tools: [lookupTool] }),
    });
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const text = await response.text();
    expect(text).not.toContain('[DONE]');
    const events = sseEvents(text);
    for (const [index, event] of events.entries()) expect(event.data).toMatchObject({ type: event.name, sequence_number: index });
    expect(events.map((event) => event.name)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events[2]!.data.item).toMatchObject({ type: 'function_call', name: 'lookup', arguments: '', status: 'in_progress', call_id: expect.stringMatching(/^call_/) });
    const args = JSON.stringify({ key: 'k'.repeat(1_500) });
    expect(events.slice(3, 5).map((event) => event.data.delta).join('')).toBe(args);
    expect(events[5]!.data).toMatchObject({ name: 'lookup', arguments: args });
    expect(events[7]!.data.response).toMatchObject({ status: 'completed', output: [{ type: 'function_call', arguments: args, status: 'completed' }] });
  });

  it('ends the stream of a failed run with response.failed, its error inside', async () => {
    const { app } = await rlmApp({ root: [{ status: 400, error: { message: 'no such model' } }] });
    const response = await app.request('/v1/responses', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'root', stream: true, input: 'q' }) });
    expect(response.status).toBe(200);
    const events = sseEvents(await response.text());
    expect(events.map((event) => event.name)).toEqual(['response.created', 'response.in_progress', 'response.failed']);
    expect(events[2]!.data.response).toMatchObject({ status: 'failed', error: { code: 'model_error', message: expect.stringContaining('no such model') } });
  });

  it('sends keep-alive comment lines while the run works, which the openai client ignores', async () => {
    const held = deferred();
    const { server } = await rlmServer({ root: async (request) => (sawOutput(request) ? 'FINAL(after a wait)' : (await held.promise, repl('print(1)'))) }, { keepAliveMs: 100 });
    const client = new OpenAI({
      baseURL: `${server.url}/v1`,
      apiKey: 'not-needed',
      maxRetries: 0,
      fetch: async (url, init) => tapped(await fetch(url, init), (text) => keepAlives(text) >= 2 && held.resolve()),
    });
    let text = '';
    for await (const event of await client.responses.create({ model: 'root', input: 'q', stream: true })) if (event.type === 'response.output_text.delta') text += event.delta;
    expect(text).toBe('after a wait');
  });
});

describe('disconnects and the run cap', () => {
  it('a client that disconnects cancels its foreground run', async () => {
    const logDir = tempFolder('rlm-responses-disconnect-');
    const { server, rootRequests } = await rlmServer({ root: () => ({ content: repl('print(1)'), delayMs: 10_000 }) }, { run: { logDir } });
    const controller = new AbortController();
    const request = fetch(`${server.url}/v1/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'root', input: 'q', stream: true }),
      signal: controller.signal,
    });
    const reader = (await request).body!.getReader();
    await reader.read(); // the stream has begun
    expect(await eventually(() => rootRequests.length === 1, 10_000)).toBe(true);
    controller.abort();
    expect(await eventually(() => runEnded(logDir), 5_000)).toBe(true);
    expect(rootRequests).toHaveLength(1);
    const running = async () => ((await (await fetch(`${server.url}/health`)).json()) as { running: number }).running;
    expect(await eventually(async () => (await running()) === 0, 5_000)).toBe(true);
  });

  it('a client that disconnects from a background stream leaves the run going', async () => {
    const { server, client } = await rlmServer({ root: (request) => (sawOutput(request) ? { content: 'FINAL(finished anyway)', delayMs: 300 } : repl('print(1)')) });
    const controller = new AbortController();
    const response = await fetch(`${server.url}/v1/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'root', input: 'q', stream: true, background: true }),
      signal: controller.signal,
    });
    const reader = response.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    const id = /"id":"(resp_\w+)"/.exec(first)![1]!;
    controller.abort();
    expect(await eventually(async () => (await client.responses.retrieve(id)).status === 'completed', 10_000)).toBe(true);
    expect((await client.responses.retrieve(id)).output_text).toBe('finished anyway');
  });

  it('a background run holds its run slot until it ends: past the cap, 429 with retry-after', async () => {
    const answer = deferred();
    const { client, post } = await rlmApp({ root: async (request) => (sawOutput(request) ? (await answer.promise, 'FINAL(done)') : repl('print(1)')) }, { maxConcurrentRuns: 1 });
    const queued = await client.responses.create({ model: 'root', input: 'q', background: true });
    const refused = await post(JSON.stringify({ model: 'root', input: 'q' }), {}, '/v1/responses');
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('1');
    answer.resolve();
    expect(await eventually(async () => (await client.responses.retrieve(queued.id)).status === 'completed', 10_000)).toBe(true);
    expect((await post(JSON.stringify({ model: 'root', input: 'q', store: false }), {}, '/v1/responses')).status).not.toBe(429);
  });
});
