import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { ConfigurationError, DEFAULTS, findLocalServer, LOCAL_SERVER_CANDIDATES, serve } from '../../src/index.js';
import { startFakeOpenAIServer, type FakeReply } from '../../src/testing.js';
import type { ChatCompletion } from '../../src/api/chat-responses.js';
import { eventually } from '../processes.js';
import { rejectionOf } from '../rejection.js';
import { rlmApp, rlmServer, seenByRoot } from './helpers.js';
import { repl } from '../repl.js';

// The official openai client is the caller: over real HTTP where the socket matters (streaming,
// hand-backs across connections, the server seen from outside), in process through hono's
// app.request() elsewhere.

const searchTool = {
  type: 'function' as const,
  function: { name: 'search_database', description: 'Searches the database', parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] } },
};
const rootCall = (id: string, query: string): FakeReply => ({ content: null, toolCalls: [{ id, name: 'search_database', arguments: { query } }] });

describe('answers', () => {
  it('answers a question about the system message, with usage', async () => {
    const { client, rootRequests } = await rlmApp({ root: [repl('print(context.length)'), 'FINAL(the contract was signed by Ada)'] });
    const completion = await client.chat.completions.create({
      model: 'root',
      messages: [
        { role: 'system', content: 'A very long contract signed by Ada.' },
        { role: 'user', content: 'Who signed it?' },
      ],
    });
    expect(completion.choices[0]!.message.content).toBe('the contract was signed by Ada');
    expect(completion.choices[0]!.finish_reason).toBe('stop');
    expect(completion.usage!.prompt_tokens).toBeGreaterThan(0);
    // The root model saw the question, never the context itself.
    expect(seenByRoot(rootRequests[0]!)).toContain('Who signed it?');
    expect(seenByRoot(rootRequests[0]!)).not.toContain('A very long contract');
    expect(seenByRoot(rootRequests[1]!)).toContain('35');
  });

  it('streams the answer: role first, content, finish reason, usage, [DONE]', async () => {
    const { client } = await rlmServer({ root: [repl('print(1)'), 'FINAL(streamed answer)'] });
    const stream = await client.chat.completions.create({
      model: 'root',
      messages: [{ role: 'user', content: 'q' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.Chat.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    expect(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('')).toBe('streamed answer');
    expect(chunks.at(-2)!.choices[0]!.finish_reason).toBe('stop');
    expect(chunks.at(-1)!.usage!.total_tokens).toBeGreaterThan(0);
  });

  it('uses the rlm_context extension field as the context', async () => {
    const { client, rootRequests } = await rlmApp({ root: [repl('print(context.items.length)'), 'FINAL(two)'] });
    const completion = await client.chat.completions.create({
      model: 'root',
      messages: [{ role: 'user', content: 'How many items?' }],
      // @ts-expect-error an rlm extension of the request body
      rlm_context: { items: [1, 2] },
    });
    expect(completion.choices[0]!.message.content).toBe('two');
    expect(seenByRoot(rootRequests[1]!)).toContain('REPL output:\\n2');
  });
});

describe.each([false, true])('tools of the caller, called by the root model (stream: %s)', (stream) => {
  async function ask(client: OpenAI, messages: OpenAI.Chat.ChatCompletionMessageParam[]) {
    if (!stream) return (await client.chat.completions.create({ model: 'root', messages, tools: [searchTool] })).choices[0]!;
    const chunks = await client.chat.completions.create({ model: 'root', messages, tools: [searchTool], stream: true });
    const calls: { id: string; name: string; arguments: string }[] = [];
    let content = '';
    let finish: string | null = null;
    for await (const chunk of chunks) {
      const choice = chunk.choices[0];
      if (!choice) continue;
      content += choice.delta.content ?? '';
      for (const piece of choice.delta.tool_calls ?? []) {
        const call = (calls[piece.index] ??= { id: '', name: '', arguments: '' });
        call.id ||= piece.id ?? '';
        call.name += piece.function?.name ?? '';
        call.arguments += piece.function?.arguments ?? '';
      }
      finish = choice.finish_reason ?? finish;
    }
    return {
      message: { content, tool_calls: calls.map((call) => ({ id: call.id, type: 'function' as const, function: { name: call.name, arguments: call.arguments } })) },
      finish_reason: finish,
    };
  }

  it('hands the calls back, then resumes the paused run with the results', async () => {
    const { client, rootRequests } = await rlmServer({
      root: [repl('var before = "kept"'), rootCall('upstream-1', 'refunds in March'), repl('FINAL(before + ":" + "done")')],
    });
    const question: OpenAI.Chat.ChatCompletionMessageParam[] = [
      { role: 'system', content: 'the context' },
      { role: 'user', content: 'How many refunds?' },
    ];
    const first = await ask(client, question);
    expect(first.finish_reason).toBe('tool_calls');
    const call = first.message.tool_calls![0]! as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
    expect(call.function).toEqual({ name: 'search_database', arguments: '{"query":"refunds in March"}' });
    expect(call.id).not.toBe('upstream-1');
    const second = await ask(client, [
      ...question,
      { role: 'assistant', content: null, tool_calls: first.message.tool_calls },
      { role: 'tool', tool_call_id: call.id, content: [{ type: 'text', text: '{"count": 7}' }] },
    ]);
    expect(second.finish_reason).toBe('stop');
    // The variable set before the pause is still there: the same sandbox, not a new run.
    expect(second.message.content).toBe('kept:done');
    expect(seenByRoot(rootRequests.at(-1)!)).toContain('{\\"count\\": 7}');
  });

  it('hands back calls made from code, one round trip per await and several at once with Promise.all', async () => {
    const code = `
      const first = await tools.search_database({ query: 'alpha' });
      const [second, third] = await Promise.all([tools.search_database({ query: 'beta' }), tools.search_database({ query: 'gamma' })]);
      FINAL([first.n, second.n, third.n].join('+'))`;
    const { client } = await rlmServer({ root: [repl(code)] });
    let messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Sum the counts.' }];
    const rounds: string[][] = [];
    for (let round = 0; round < 5; round++) {
      const reply = await ask(client, messages);
      if (reply.finish_reason !== 'tool_calls') {
        expect(reply.message.content).toBe('5+4+5');
        break;
      }
      const calls = reply.message.tool_calls! as OpenAI.Chat.ChatCompletionMessageFunctionToolCall[];
      rounds.push(calls.map((call) => JSON.parse(call.function.arguments).query));
      messages = [
        ...messages,
        { role: 'assistant', tool_calls: calls },
        ...calls.map((call) => ({ role: 'tool' as const, tool_call_id: call.id, content: JSON.stringify({ n: JSON.parse(call.function.arguments).query.length }) })),
      ];
    }
    expect(rounds).toEqual([['alpha'], ['beta', 'gamma']]);
  });
});

describe('paused runs', () => {
  it('gives each hand-back its own ids, even when the upstream reuses them', async () => {
    const { client } = await rlmApp({ root: [rootCall('same-id', 'a'), rootCall('same-id', 'b'), repl('FINAL("done")')] });
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'q' }];
    const first = (await client.chat.completions.create({ model: 'root', messages, tools: [searchTool] })).choices[0]!.message;
    const resumed = [...messages, { role: 'assistant' as const, tool_calls: first.tool_calls }, { role: 'tool' as const, tool_call_id: first.tool_calls![0]!.id, content: 'a result' }];
    const second = (await client.chat.completions.create({ model: 'root', messages: resumed, tools: [searchTool] })).choices[0]!.message;
    expect(second.tool_calls![0]!.id).not.toBe(first.tool_calls![0]!.id);
    const done = await client.chat.completions.create({
      model: 'root',
      messages: [...resumed, { role: 'assistant', content: '', tool_calls: second.tool_calls }, { role: 'tool', tool_call_id: second.tool_calls![0]!.id, content: 'b result' }],
      tools: [searchTool],
    });
    expect(done.choices[0]!.message.content).toBe('done');
  });

  it('answers an unknown tool call id with a 404 that says so', async () => {
    const { client } = await rlmApp({ root: ['FINAL(unused)'] });
    const error = await client.chat.completions
      .create({
        model: 'root',
        messages: [
          { role: 'user', content: 'q' },
          { role: 'assistant', content: null, tool_calls: [{ id: 'call_nope', type: 'function', function: { name: 'search_database', arguments: '{}' } }] },
          { role: 'tool', tool_call_id: 'call_nope', content: 'r' },
        ],
      })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    expect((error as InstanceType<typeof OpenAI.APIError>).code).toBe('tool_call_not_found');
    expect((error as Error).message).toContain('No paused run is waiting for tool call call_nope');
  });

  it('stops a paused run when its time to live runs out', async () => {
    const { client, app, completions } = await rlmApp({ root: [rootCall('x', 'q')] }, { pausedRunTtlMs: 200 });
    const first = (await client.chat.completions.create({ model: 'root', messages: [{ role: 'user', content: 'q' }], tools: [searchTool] })).choices[0]!.message;
    expect(completions.pausedRuns).toBe(1);
    // The TTL itself is tested with a hand-moved clock (tests/api/paused-runs.test.ts); here, its end as /health reports it.
    expect(await eventually(() => completions.pausedRuns === 0, 10_000)).toBe(true);
    const health = (await (await app.request('/health')).json()) as { pausedRuns: number };
    expect(health.pausedRuns).toBe(0);
    const error = await client.chat.completions
      .create({
        model: 'root',
        messages: [{ role: 'user', content: 'q' }, { role: 'assistant', tool_calls: first.tool_calls }, { role: 'tool', tool_call_id: first.tool_calls![0]!.id, content: 'late' }],
      })
      .catch((caught: unknown) => caught);
    expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(404);
  });
});

describe('forced answers over HTTP', () => {
  it('keeps a forced answer but marks it: finish_reason "length" and the rlm object', async () => {
    const { client } = await rlmApp({ root: [repl('print(1)'), 'Still looking.'] }, { run: { maxIterations: 1 } });
    const completion = (await client.chat.completions.create({ model: 'root', messages: [{ role: 'user', content: 'q' }] })) as OpenAI.ChatCompletion & Pick<ChatCompletion, 'rlm'>;
    expect(completion.choices[0]).toMatchObject({ message: { content: 'Still looking.' }, finish_reason: 'length' });
    expect(completion.rlm).toEqual({ forced: true, iterations: 1, cost_usd: null });
  });
});

describe('rlm serve, seen from outside', () => {
  it('says it is rlm, and local-server discovery skips it for the next real server', async () => {
    // An upstream that lists no models: rlm serve's own list is empty, so only its header tells.
    const { server } = await rlmServer({ root: ['FINAL(x)'], models: [] });
    const listed = await fetch(`${server.url}/v1/models`);
    expect(listed.headers.get('x-rlm-server')).toBe('rlm');
    const real = await startFakeOpenAIServer({ models: ['local-model'] });
    try {
      const found = await findLocalServer([
        { name: 'rlm serve', baseURL: `${server.url}/v1` },
        { name: 'real', baseURL: real.baseURL },
      ]);
      expect(found).toEqual({ name: 'real', baseURL: real.baseURL, models: ['local-model'] });
    } finally {
      await real.close();
    }
  });

  it('lists its models as owned by rlm, which discovery skips without the header too', async () => {
    const { server } = await rlmServer({ root: ['FINAL(x)'], models: ['root'] });
    const body = (await (await fetch(`${server.url}/v1/models`)).json()) as { data: { id: string; owned_by: string }[] };
    expect(body.data).toEqual([expect.objectContaining({ id: 'root', owned_by: 'rlm' })]);
    const headerless = await startFakeOpenAIServer({ models: [] });
    const imitation = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify(body));
    });
    await new Promise<void>((resolve) => imitation.listen(0, '127.0.0.1', resolve));
    try {
      const imitationURL = `http://127.0.0.1:${(imitation.address() as AddressInfo).port}/v1`;
      expect(await findLocalServer([{ name: 'older rlm serve', baseURL: imitationURL }, { name: 'real', baseURL: headerless.baseURL }])).toMatchObject({ name: 'real' });
    } finally {
      imitation.close();
      await headerless.close();
    }
  });

  it('splits root:sub when the upstream lists no models', async () => {
    const { client, rootRequests, upstream } = await rlmServer({ root: [repl('const a = llm_query("hi")'), 'FINAL(done)'], models: [] });
    const completion = await client.chat.completions.create({ model: 'root:sub', messages: [{ role: 'user', content: 'q' }] });
    expect(completion.choices[0]!.message.content).toBe('done');
    expect(rootRequests).toHaveLength(2);
    expect(upstream.requests.map((request) => request.body.model)).toEqual(['root', 'sub', 'root']);
  });

  it('refuses a port in use with a configuration error that says what to do', async () => {
    const { server } = await rlmServer({ root: ['FINAL(x)'] });
    const port = Number(new URL(server.url).port);
    const error = await rejectionOf(serve({ port, run: { baseURL: 'http://127.0.0.1:9/v1' } }), ConfigurationError);
    expect(error.message).toBe(`port ${port} is in use; pick one with --port (serve({ port }) in a program)`);
  });

  it('listens by default on a port local-server discovery never probes', () => {
    const probed = LOCAL_SERVER_CANDIDATES.map((candidate) => Number(new URL(candidate.baseURL).port));
    expect(probed).not.toContain(DEFAULTS.server.port);
  });
});
