import { afterEach, describe, expect, it } from 'vitest';
import { OpenAIModel, RLM, type ChatMessage, type RLMOptions } from '../../src/index.js';
import { alternateRoles } from '../../src/engine/alternation.js';
import { chatTemplateProblem } from '../../src/testing/chat-template.js';
import { startFakeOpenAIServer, type FakeOpenAIServer, type FakeReply, type FakeRequest } from '../../src/testing.js';
import { repl } from '../repl.js';

// Root requests against a server that applies a strict chat template (Mistral's, Gemma's): it
// answers 400 to anything but one optional system message, then user and assistant in turn.

const servers: FakeOpenAIServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

type Reply = FakeReply | ((request: FakeRequest) => FakeReply);

/** An RLM whose root model answers `replies` in order, through the real openai client. */
async function strictRlm(replies: Reply[], options: Partial<RLMOptions> = {}) {
  const queue = [...replies];
  const server = await startFakeOpenAIServer({
    requireAlternation: true,
    reply: (request) => {
      const next = queue.shift() ?? { status: 500, error: { message: 'no more replies scripted' } };
      return typeof next === 'function' ? next(request) : next;
    },
  });
  servers.push(server);
  const languageModel = new OpenAIModel({ baseURL: server.baseURL, maxRetries: 0 });
  return { rlm: new RLM({ model: 'root', languageModel, ...options }), server };
}

const rolesOf = (request: FakeRequest) => (request.body.messages as { role: string }[]).map((message) => message.role);
const textOf = (request: FakeRequest) => JSON.stringify(request.body.messages);

describe('the fake server with requireAlternation', () => {
  it('answers 400 with the template error to same-role neighbours, and takes no reply for it', async () => {
    const server = await startFakeOpenAIServer({ requireAlternation: true, replies: ['ok'] });
    servers.push(server);
    const post = (messages: unknown[]) =>
      fetch(`${server.baseURL}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages }) });
    const refused = await post([{ role: 'system', content: 's' }, { role: 'user', content: 'a' }, { role: 'user', content: 'b' }]);
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toContain('Conversation roles must alternate user/assistant/user/assistant/...');
    const accepted = await post([{ role: 'system', content: 's' }, { role: 'user', content: 'a' }]);
    expect(accepted.status).toBe(200);
  });

  it('accepts tool-call turns where the model speaks next, and refuses a user turn right after one', () => {
    const call = { id: 'c1', type: 'function', function: { name: 't', arguments: '{}' } };
    const turn = [{ role: 'user', content: 'q' }, { role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: 'c1', content: 'r' }];
    expect(chatTemplateProblem(turn)).toBeUndefined();
    expect(chatTemplateProblem([...turn, { role: 'assistant', content: 'a' }, { role: 'user', content: 'more' }])).toBeUndefined();
    expect(chatTemplateProblem([...turn, { role: 'user', content: 'more' }])).toMatch(/role "user" where "assistant" was due/);
    expect(chatTemplateProblem([{ role: 'user', content: 'q' }, { role: 'assistant', content: 'a' }])).toMatch(/last message/);
  });
});

describe('root requests alternate roles', () => {
  it('over a multi-turn run with several blocks per reply and a reply without code', async () => {
    const { rlm, server } = await strictRlm([
      `Two looks.\n${repl('const n = context.length; print(n)')}\n${repl('print(n * 2)')}`,
      'I will think about it without code.',
      repl('print("third")'),
      'FINAL(done)',
    ]);
    const result = await rlm.completion({ context: 'abcde', query: 'How long?' });
    expect(result.response).toBe('done');
    expect(server.requests).toHaveLength(4);
    expect(rolesOf(server.requests[1]!)).toEqual(['system', 'user', 'assistant', 'user']);
    // Both blocks' outputs and the turn prompt, in order, in one user message.
    const merged = String((server.requests[1]!.body.messages as ChatMessage[])[3]!.content);
    expect(merged.indexOf('REPL output:\n5')).toBeGreaterThan(-1);
    expect(merged.indexOf('REPL output:\n10')).toBeGreaterThan(merged.indexOf('REPL output:\n5'));
    expect(merged).toContain('How long?');
    // The reply without code is followed by the note and the next turn prompt, as the user's turn.
    expect(rolesOf(server.requests[2]!)).toEqual(['system', 'user', 'assistant', 'user', 'assistant', 'user']);
    expect(textOf(server.requests[2]!)).toContain('no ```repl block');
  });

  it('in a session, whose later turns load the earlier conversation', async () => {
    const { rlm, server } = await strictRlm([repl('print(context)'), 'FINAL(first)', repl('print(history_0.length)'), 'FINAL(second)']);
    const session = rlm.session();
    try {
      expect((await session.completion({ context: 'one', query: 'q1' })).response).toBe('first');
      expect((await session.completion({ context: 'two', query: 'q2' })).response).toBe('second');
    } finally {
      await session.close();
    }
    expect(server.requests).toHaveLength(4);
    expect(textOf(server.requests[3]!)).toContain('history_0');
  });

  it('when the conversation is compacted', async () => {
    const asksForSummary = (request: FakeRequest) => textOf(request).includes('about to be replaced by a summary');
    let turns = 0;
    const longTurn = (request: FakeRequest): FakeReply => {
      if (asksForSummary(request)) return 'Summary: x is 42, in the variable x.';
      if (textOf(request).includes('was replaced by your summary')) return repl('FINAL(`x=${x}`)');
      turns += 1;
      return repl(turns === 1 ? 'const x = 42; print("a".repeat(2000))' : 'print("b".repeat(2000))');
    };
    const { rlm, server } = await strictRlm(Array.from({ length: 12 }, () => longTurn), { contextWindow: 6_000, maxIterations: 10 });
    const events = [];
    for await (const event of rlm.stream({ context: 'c', query: 'What is x?' })) events.push(event);
    expect(events.at(-1)).toMatchObject({ type: 'run-end', result: { response: 'x=42' } });
    expect(events.some((event) => event.type === 'compaction')).toBe(true);
    const summaryRequest = server.requests.find(asksForSummary)!;
    expect(rolesOf(summaryRequest).at(-1)).toBe('user');
    expect(rolesOf(server.requests.at(-1)!)).toEqual(['system', 'user', 'assistant', 'user']);
  });

  it('in the forced last turn, after block outputs', async () => {
    const { rlm, server } = await strictRlm([repl('print(1)'), repl('print(2)'), 'My best answer: 3'], { maxIterations: 2 });
    const result = await rlm.completion({ context: 'c', query: 'q' });
    expect(result.response).toBe('My best answer: 3');
    expect(result.forced).toBe(true);
    const forced = server.requests.at(-1)!;
    expect(rolesOf(forced)).toEqual(['system', 'user', 'assistant', 'user', 'assistant', 'user']);
    expect(textOf(forced)).toContain('You have used all your turns');
  });
});

describe('root requests with the caller\'s tools', () => {
  const searchSpec = { type: 'function' as const, function: { name: 'search_database', description: 'Search', parameters: { type: 'object', properties: { query: { type: 'string' } } } } };
  const callerTools = { specs: [searchSpec], call: async (calls: { arguments: string }[]) => calls.map(() => '{"rows": 3}') };

  it('send the tool-call turn natively, with the question before it and the results last', async () => {
    const { rlm, server } = await strictRlm([
      'Nothing to run yet.',
      { content: 'Let me search.', toolCalls: [{ name: 'search_database', arguments: { query: 'refunds' } }] },
      repl('print("rows: 3")'),
      'FINAL(3 refunds)',
    ]);
    const result = await rlm.completion({ context: 'c', query: 'How many refunds?', callerTools });
    expect(result.response).toBe('3 refunds');
    const afterResults = server.requests[2]!;
    expect(rolesOf(afterResults)).toEqual(['system', 'user', 'assistant', 'user', 'assistant', 'tool']);
    const messages = afterResults.body.messages as ChatMessage[];
    expect(messages[3]!.content).toContain('How many refunds?');
    expect(messages[4]).toMatchObject({ role: 'assistant', content: 'Let me search.', tool_calls: [{ function: { name: 'search_database' } }] });
    expect(messages[5]).toMatchObject({ role: 'tool', content: '{"rows": 3}' });
    expect(rolesOf(server.requests[3]!)).toEqual(['system', 'user', 'assistant', 'user', 'assistant', 'tool', 'assistant', 'user']);
  });

  it('write a tool-call turn out as text when the user speaks right after it (the forced answer)', async () => {
    const { rlm, server } = await strictRlm([{ content: null, toolCalls: [{ name: 'search_database', arguments: { query: 'refunds' } }] }, 'There are 3 refunds.'], { maxIterations: 1 });
    const result = await rlm.completion({ context: 'c', query: 'How many refunds?', callerTools });
    expect(result).toMatchObject({ response: 'There are 3 refunds.', forced: true });
    const forced = server.requests.at(-1)!;
    expect(rolesOf(forced)).toEqual(['system', 'user', 'assistant', 'user']);
    const messages = forced.body.messages as ChatMessage[];
    expect(messages[2]!.content).toContain('search_database({"query":"refunds"})');
    expect(messages[3]!.content).toMatch(/Result of search_database:\n\{"rows": 3\}\n\nYou have used all your turns/);
  });
});

describe('alternateRoles', () => {
  it('merges neighbours of one role, keeping every text in order, content parts included', () => {
    const sent = alternateRoles([
      { role: 'system', content: 's1' },
      { role: 'system', content: 's2' },
      { role: 'user', content: 'a' },
      { role: 'user', content: [{ type: 'text', text: 'b' }] },
      { role: 'assistant', content: 'x' },
      { role: 'assistant', content: '' },
      { role: 'assistant', content: 'y' },
      { role: 'user', content: 'c' },
    ]);
    expect(sent).toEqual([
      { role: 'system', content: 's1\n\ns2' },
      { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: '\n\n' }, { type: 'text', text: 'b' }] },
      { role: 'assistant', content: 'x\n\ny' },
      { role: 'user', content: 'c' },
    ]);
  });

  it('joins a plain reply to the tool-call reply after it, keeping the calls', () => {
    const call = { id: 'c1', type: 'function' as const, function: { name: 't', arguments: '{}' } };
    const sent = alternateRoles([
      { role: 'user', content: 'q' },
      { role: 'assistant', content: 'thinking' },
      { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: 'c1', content: 'r' },
    ]);
    expect(sent).toEqual([{ role: 'user', content: 'q' }, { role: 'assistant', content: 'thinking', tool_calls: [call] }, { role: 'tool', tool_call_id: 'c1', content: 'r' }]);
  });
});
