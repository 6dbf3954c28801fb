import { describe, expect, it } from 'vitest';
import { RLM, type ChatMessage, type ToolCall } from '../../src/index.js';
import { ScriptedModel } from '../../src/testing.js';
import { rejectionOf } from '../rejection.js';
import { repl } from '../repl.js';

const searchSpec = { type: 'function' as const, function: { name: 'search_database', description: 'Search', parameters: { type: 'object', properties: { query: { type: 'string' } } } } };

describe('tools of the caller, called by the root model', () => {
  it('hands the calls back, waits for the results, and goes on with them', async () => {
    const root = new ScriptedModel([
      { content: 'Let me search.', toolCalls: [{ id: 'upstream-1', name: 'search_database', arguments: { query: 'refunds' } }, { id: 'upstream-1', name: 'no_such_tool', arguments: {} }] },
      repl('print(1)'),
      'FINAL(3 refunds)',
    ]);
    const handedBack: ToolCall[][] = [];
    const rlm = new RLM({ model: 'root', languageModel: root });
    const result = await rlm.completion({
      context: 'c',
      query: 'How many refunds?',
      callerTools: {
        specs: [searchSpec],
        call: async (calls) => {
          handedBack.push(calls);
          return calls.map(() => '{"rows": 3}');
        },
      },
    });
    expect(result.response).toBe('3 refunds');
    expect(handedBack).toHaveLength(1);
    expect(handedBack[0]).toEqual([{ id: expect.stringMatching(/^call_[0-9a-f]{8}_1$/), name: 'search_database', arguments: '{"query":"refunds"}' }]);
    expect(root.calls[0]!.tools).toEqual([searchSpec]);
    // The next root call sees its own tool calls (with the ids the caller saw) and the results.
    const messages = root.calls[1]!.messages as ChatMessage[];
    const assistant = messages.find((message) => message.role === 'assistant') as Extract<ChatMessage, { role: 'assistant' }>;
    expect(assistant.tool_calls?.map((call) => call.id)).toEqual([handedBack[0]![0]!.id, expect.stringMatching(/^call_/)]);
    const toolMessages = messages.filter((message) => message.role === 'tool') as Extract<ChatMessage, { role: 'tool' }>[];
    expect(toolMessages.map((message) => message.content)).toEqual(['{"rows": 3}', 'Error: Unknown tool "no_such_tool". Available tools: search_database.']);
    expect(result.trajectory[0]!.callerToolCalls).toHaveLength(2);
  });

  it('stops waiting when the run is cancelled', async () => {
    const root = new ScriptedModel([{ content: null, toolCalls: [{ name: 'search_database', arguments: {} }] }]);
    const controller = new AbortController();
    const goneAway = new Error('client went away');
    const started = Date.now();
    const run = new RLM({ model: 'root', languageModel: root }).completion({
      context: 'c',
      signal: controller.signal,
      callerTools: {
        specs: [searchSpec],
        // The client goes away while the run waits for its tool results.
        call: (_calls, signal) =>
          new Promise((_, reject) => {
            signal.addEventListener('abort', () => reject(signal.reason));
            controller.abort(goneAway);
          }),
      },
    });
    expect(await rejectionOf(run, Error)).toBe(goneAway);
    expect(Date.now() - started).toBeLessThan(3_000);
  });
});

describe('tools of the caller, called from code', () => {
  it('sends calls made together as one hand-back, and gives the code parsed results', async () => {
    const code = `
      const [march, april] = await Promise.all([tools.search_database({ query: 'march' }), tools.search_database({ query: 'april' })]);
      const text = await tool_handler('search_database', { query: 'may' });
      FINAL([march.rows, april.rows, typeof text].join(','))`;
    const root = new ScriptedModel([repl(code)]);
    const handedBack: ToolCall[][] = [];
    const result = await new RLM({ model: 'root', languageModel: root }).completion({
      context: 'c',
      callerTools: {
        specs: [searchSpec],
        call: async (calls) => {
          handedBack.push(calls);
          return calls.map((call) => JSON.stringify({ rows: (JSON.parse(call.arguments) as { query: string }).query.length }));
        },
      },
    });
    expect(result.response).toBe('5,5,string');
    expect(handedBack.map((calls) => calls.map((call) => JSON.parse(call.arguments).query))).toEqual([['march', 'april'], ['may']]);
    expect(new Set(handedBack.flat().map((call) => call.id)).size).toBe(3);
    // The root model was told how to call them.
    expect(JSON.stringify(root.calls[0]!.messages[0])).toContain('await tools.NAME(args)');
  });

  it('lets the code catch a failed hand-back', async () => {
    const root = new ScriptedModel([repl('try { await tools.search_database({}) } catch (error) { FINAL("caught: " + error.message) }')]);
    const result = await new RLM({ model: 'root', languageModel: root }).completion({
      context: 'c',
      callerTools: { specs: [searchSpec], call: async () => Promise.reject(new Error('the caller refused')) },
    });
    expect(result.response).toBe('caught: the caller refused');
  });
});
