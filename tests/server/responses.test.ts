import OpenAI from 'openai';
import { zodTextFormat } from 'openai/helpers/zod';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { FakeReply } from '../../src/testing.js';
import { deferred } from '../deferred.js';
import { eventually } from '../processes.js';
import { rejectionOf } from '../rejection.js';
import { repl } from '../repl.js';
import { tempFolder } from '../temp-folder.js';
import { rlmApp, rlmServer, runEnded, sawOutput, seenByRoot } from './helpers.js';

// POST /v1/responses and its background mode, called by the official openai client: over real
// HTTP where the socket matters (streams, disconnects, hand-backs across connections), in process
// through hono's app.request() elsewhere.

const searchTool = {
  type: 'function' as const,
  name: 'search_database',
  description: 'Searches the database',
  parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'], additionalProperties: false },
  strict: true,
};
const rootCall = (id: string, query: string): FakeReply => ({ content: null, toolCalls: [{ id, name: 'search_database', arguments: { query } }] });
type WithRlm = OpenAI.Responses.Response & { rlm: { forced: boolean; iterations: number; cost_usd: number | null } };

describe('answers', () => {
  it('reads instructions as the context and input as the question, and answers with a message, usage and rlm', async () => {
    const { client, rootRequests } = await rlmApp({ root: [repl('print(context.length)'), 'FINAL(the contract was signed by Ada)'] });
    const response = (await client.responses.create({ model: 'root', instructions: 'A very long contract signed by Ada.', input: 'Who signed it?' })) as WithRlm;
    expect(response).toMatchObject({ object: 'response', status: 'completed', model: 'root', error: null, background: false, instructions: null });
    expect(response.id).toMatch(/^resp_/);
    expect(response.output).toEqual([
      { type: 'message', id: expect.stringMatching(/^msg_/), status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'the contract was signed by Ada', annotations: [], logprobs: [] }] },
    ]);
    expect(response.output_text).toBe('the contract was signed by Ada');
    expect(response.usage!.input_tokens).toBeGreaterThan(0);
    expect(response.usage!.total_tokens).toBe(response.usage!.input_tokens + response.usage!.output_tokens);
    expect(response.rlm).toEqual({ forced: false, iterations: 2, cost_usd: null });
    expect(seenByRoot(rootRequests[0]!)).toContain('Who signed it?');
    expect(seenByRoot(rootRequests[0]!)).not.toContain('A very long contract');
    expect(seenByRoot(rootRequests[1]!)).toContain('35');
  });

  it('takes the earlier input items as the context, and rlm_context instead when given', async () => {
    const { client, rootRequests } = await rlmApp({ root: [repl('print(JSON.stringify(context))'), 'FINAL(a)', repl('print(context.items.length)'), 'FINAL(two)'] });
    await client.responses.create({
      model: 'root',
      instructions: 'Be brief.',
      input: [
        { role: 'user', content: 'first document' },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'noted' }] },
        { role: 'user', content: [{ type: 'input_text', text: 'What did I send?' }] },
      ],
    } as OpenAI.Responses.ResponseCreateParamsNonStreaming);
    const context = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'first document' },
      { role: 'assistant', content: 'noted' },
    ];
    expect(seenByRoot(rootRequests[0]!)).toContain('What did I send?');
    expect(seenByRoot(rootRequests[1]!)).toContain(JSON.stringify(JSON.stringify(context)).slice(1, -1));
    // @ts-expect-error an rlm extension of the request body
    const response = await client.responses.create({ model: 'root', input: 'How many items?', rlm_context: { items: [1, 2] } });
    expect(response.output_text).toBe('two');
    expect(seenByRoot(rootRequests[3]!)).toContain('REPL output:\\n2');
  });

  it('streams the Responses event sequence, numbered from 0, and the openai client reads the text', async () => {
    const { client } = await rlmServer({ root: [repl('print(1)'), 'FINAL(streamed answer)'] });
    const stream = await client.responses.create({ model: 'root', input: 'q', stream: true });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    expect(events.map((event) => event.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events.map((event) => event.sequence_number)).toEqual(events.map((_, index) => index));
    expect(events.filter((event) => event.type === 'response.output_text.delta').map((event) => event.delta).join('')).toBe('streamed answer');
    const completed = events.at(-1) as OpenAI.Responses.ResponseCompletedEvent;
    expect(completed.response.output[0]).toMatchObject({ type: 'message', content: [{ text: 'streamed answer' }] });
    expect(completed.response.usage!.total_tokens).toBeGreaterThan(0);
  });

  it('answers text.format json_schema with the structured answer: responses.parse() gives output_parsed', async () => {
    const Contract = z.object({ parties: z.array(z.string()), total: z.number() });
    const value = { parties: ['Ada', 'Bob'], total: 1200 };
    const { client, rootRequests } = await rlmServer({ root: [repl('FINAL({ parties: ["Ada"] })'), repl(`FINAL(${JSON.stringify(value)})`)] });
    const response = await client.responses.parse({ model: 'root', input: 'Who signed, for how much?', text: { format: zodTextFormat(Contract, 'contract') } });
    expect(response.output_parsed).toEqual(value);
    expect(seenByRoot(rootRequests[0]!)).toContain(`The answer's shape`);
    expect(seenByRoot(rootRequests[1]!)).toMatch(/total/);
  });

  it('answers 422 invalid_output naming text.format when the run finds no matching answer', async () => {
    const { client } = await rlmApp({ root: [repl('print(1)'), JSON.stringify({ count: 'many' })] }, { run: { maxIterations: 1 } });
    const format = { type: 'json_schema' as const, name: 'count', schema: { type: 'object', properties: { count: { type: 'integer' } }, required: ['count'] }, strict: false };
    const error = await rejectionOf(client.responses.create({ model: 'root', input: 'How many?', text: { format } }), OpenAI.UnprocessableEntityError);
    expect(error).toMatchObject({ status: 422, code: 'invalid_output', param: 'text.format' });
    expect(error.message).toContain('The run found no answer matching text.format');
  });
});

/** A response, from JSON or from the `response.completed` event of a stream (whose argument deltas must add up). */
async function respond(client: OpenAI, body: OpenAI.Responses.ResponseCreateParamsNonStreaming, stream: boolean): Promise<OpenAI.Responses.Response> {
  if (!stream) return client.responses.create(body);
  const events: OpenAI.Responses.ResponseStreamEvent[] = [];
  for await (const event of await client.responses.create({ ...body, stream: true })) events.push(event);
  const completed = (events.at(-1) as OpenAI.Responses.ResponseCompletedEvent).response;
  for (const item of completed.output.filter((entry) => entry.type === 'function_call')) {
    const deltas = events.filter((event) => event.type === 'response.function_call_arguments.delta' && event.item_id === item.id);
    expect(deltas.map((event) => (event as OpenAI.Responses.ResponseFunctionCallArgumentsDeltaEvent).delta).join('')).toBe(item.arguments);
  }
  return completed;
}

/** The text of a response's message (a streamed response has no `output_text`: the openai client adds it to JSON ones). */
const answerText = (response: OpenAI.Responses.Response) => response.output.flatMap((item) => (item.type === 'message' ? item.content.map((part) => (part.type === 'output_text' ? part.text : '')) : [])).join('');
const functionCalls = (response: OpenAI.Responses.Response) => response.output.filter((item) => item.type === 'function_call');

describe.each([false, true])('function tools of the caller (stream: %s)', (stream) => {
  it('hands the call back as a function_call item, and resumes the paused run by previous_response_id', async () => {
    const { client, rootRequests } = await rlmServer({
      root: [repl('var before = "kept"'), rootCall('upstream-1', 'refunds in March'), repl('FINAL(before + ":" + "done")')],
    });
    const first = await respond(client, { model: 'root', instructions: 'the context', input: 'How many refunds?', tools: [searchTool] }, stream);
    expect(first.status).toBe('completed');
    const [call] = functionCalls(first);
    expect(call).toMatchObject({ type: 'function_call', id: expect.stringMatching(/^fc_/), call_id: expect.stringMatching(/^call_/), name: 'search_database', arguments: '{"query":"refunds in March"}' });
    const second = await respond(client, { model: 'root', previous_response_id: first.id, input: [{ type: 'function_call_output', call_id: call!.call_id, output: '{"count": 7}' }], tools: [searchTool] }, stream);
    expect(second.previous_response_id).toBe(first.id);
    // The variable set before the pause is still there: the same sandbox, not a new run.
    expect(answerText(second)).toBe('kept:done');
    expect(seenByRoot(rootRequests.at(-1)!)).toContain('{\\"count\\": 7}');
  });

  it('resumes by the whole input sent again, for calls made from code with Promise.all', async () => {
    const code = `
      const [a, b] = await Promise.all([tools.search_database({ query: 'alpha' }), tools.search_database({ query: 'be' })]);
      FINAL(a.n + '+' + b.n)`;
    const { client } = await rlmServer({ root: [repl(code)] });
    const input: OpenAI.Responses.ResponseInputItem[] = [{ role: 'user', content: 'Sum the counts.' }];
    const first = await respond(client, { model: 'root', input, tools: [searchTool] }, stream);
    const calls = functionCalls(first);
    expect(calls.map((call) => JSON.parse(call.arguments).query)).toEqual(['alpha', 'be']);
    const outputs = calls.map((call) => ({ type: 'function_call_output' as const, call_id: call.call_id, output: [{ type: 'input_text' as const, text: JSON.stringify({ n: JSON.parse(call.arguments).query.length }) }] }));
    const done = await respond(client, { model: 'root', input: [...input, ...calls, ...outputs], tools: [searchTool] }, stream);
    expect(answerText(done)).toBe('5+2');
  });
});

describe('background responses', () => {
  it('answer at once with "queued", are polled to "completed", and stream from a sequence number', async () => {
    const answer = deferred();
    const { client, server } = await rlmServer({ root: async (request) => (sawOutput(request) ? (await answer.promise, 'FINAL(in the background)') : repl('print(1)')) });
    const queued = await client.responses.create({ model: 'root', input: 'q', background: true });
    expect(queued).toMatchObject({ status: 'queued', background: true, output: [] });
    expect((await client.responses.retrieve(queued.id)).status).toBe('in_progress');
    // A background run holds a run slot until it ends.
    expect(((await (await fetch(`${server.url}/health`)).json()) as { running: number }).running).toBe(1);
    answer.resolve();
    expect(await pollUntil(client, queued.id, (response) => response.status === 'completed')).toMatchObject({ status: 'completed', output_text: 'in the background' });
    expect(((await (await fetch(`${server.url}/health`)).json()) as { running: number }).running).toBe(0);
    const all: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of await client.responses.retrieve(queued.id, { stream: true })) all.push(event);
    expect(all.slice(0, 3).map((event) => event.type)).toEqual(['response.created', 'response.queued', 'response.in_progress']);
    expect(all.at(-1)!.type).toBe('response.completed');
    const rest: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of await client.responses.retrieve(queued.id, { stream: true, starting_after: 4 })) rest.push(event);
    expect(rest).toEqual(all.slice(5));
  });

  it('are cancelled by POST /v1/responses/{id}/cancel, which stops the run', async () => {
    const logDir = tempFolder('rlm-cancel-');
    const { client, rootRequests } = await rlmApp({ root: () => ({ content: repl('print(1)'), delayMs: 10_000 }) }, { run: { logDir } });
    const queued = await client.responses.create({ model: 'root', input: 'q', background: true });
    expect(await eventually(() => rootRequests.length === 1, 10_000)).toBe(true);
    const cancelled = await client.responses.cancel(queued.id);
    expect(cancelled.status).toBe('cancelled');
    expect(await eventually(() => runEnded(logDir), 5_000)).toBe(true);
    expect(rootRequests).toHaveLength(1);
    expect((await client.responses.retrieve(queued.id)).status).toBe('cancelled');
    // Cancelling again changes nothing.
    expect((await client.responses.cancel(queued.id)).status).toBe('cancelled');
  });

  it('report a failed run as status "failed" with its error', async () => {
    const { client } = await rlmApp({ root: [{ status: 400, error: { message: 'no such model' } }] });
    const queued = await client.responses.create({ model: 'root', input: 'q', background: true });
    const failed = await pollUntil(client, queued.id, (response) => response.status !== 'queued' && response.status !== 'in_progress');
    expect(failed.status).toBe('failed');
    expect(failed.error).toMatchObject({ code: 'model_error', message: expect.stringContaining('The upstream model failed') });
  });

  it('are kept for the response TTL once finished, and a response with store: false not at all', async () => {
    const { client } = await rlmApp({ root: [repl('print(1)'), 'FINAL(a)', repl('print(2)'), 'FINAL(b)'] }, { responseTtlMs: 200 });
    const kept = await client.responses.create({ model: 'root', input: 'q' });
    expect((await client.responses.retrieve(kept.id)).output_text).toBe('a');
    const unkept = await client.responses.create({ model: 'root', input: 'q', store: false });
    expect(unkept.output_text).toBe('b');
    const missing = await rejectionOf(client.responses.retrieve(unkept.id), OpenAI.NotFoundError);
    expect(missing.code).toBe('response_not_found');
    expect(missing.message).toContain(`No response ${unkept.id}: it expired (finished responses are kept 200 ms), was created with store: false`);
    const gone = () => client.responses.retrieve(kept.id).then(() => false, (error: unknown) => error instanceof OpenAI.NotFoundError);
    expect(await eventually(gone, 10_000)).toBe(true);
  });
});

/** The response once `done` holds for it (polled every 50 ms, for 10 s at most). */
async function pollUntil(client: OpenAI, id: string, done: (response: OpenAI.Responses.Response) => boolean): Promise<OpenAI.Responses.Response> {
  let last: OpenAI.Responses.Response | undefined;
  await eventually(async () => done((last = await client.responses.retrieve(id))), 10_000);
  return last!;
}
