import { singleModelProvider } from '../../src/lm/provider.js';
import { describe, expect, it } from 'vitest';
import { ConfigurationError, runToolLoop, ToolLoopError, type ChatRequest } from '../../src/index.js';
import { ModelGateway } from '../../src/lm/gateway.js';
import { ModelScheduler } from '../../src/lm/scheduler.js';
import { UsageTracker } from '../../src/lm/usage.js';
import { ScriptedModel } from '../../src/testing.js';
import { rejectionOf, thrownBy } from '../rejection.js';

const tools = [
  { type: 'function' as const, function: { name: 'add', parameters: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } } } } },
  { type: 'function' as const, function: { name: 'fail', parameters: { type: 'object' } } },
];
const request = (extra: Partial<ChatRequest> = {}): ChatRequest => ({ model: 'm', messages: [{ role: 'user', content: 'go' }], tools, ...extra });
const add = async (name: string, args: Record<string, unknown>) => {
  if (name === 'fail') throw new Error('database down');
  return Number(args.a) + Number(args.b);
};

describe('the tool-calling loop', () => {
  it('runs tool calls in order and sends results back until the model answers', async () => {
    const model = new ScriptedModel([
      { toolCalls: [{ id: 'c1', name: 'add', arguments: { a: 1, b: 2 } }, { id: 'c2', name: 'add', arguments: { a: 3, b: 4 } }] },
      { toolCalls: [{ id: 'c3', name: 'add', arguments: { a: 10, b: 0 } }] },
      'The sums are 3, 7 and 10.',
    ]);
    const order: string[] = [];
    const answer = await runToolLoop({
      model,
      request: request(),
      handler: async (name, args) => {
        order.push(JSON.stringify(args));
        return add(name, args);
      },
    });
    expect(answer).toBe('The sums are 3, 7 and 10.');
    expect(order).toEqual(['{"a":1,"b":2}', '{"a":3,"b":4}', '{"a":10,"b":0}']);
    const second = model.calls[1]!.messages;
    expect(second).toEqual([
      { role: 'user', content: 'go' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'c1', type: 'function', function: { name: 'add', arguments: '{"a":1,"b":2}' } },
          { id: 'c2', type: 'function', function: { name: 'add', arguments: '{"a":3,"b":4}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'c1', content: '3' },
      { role: 'tool', tool_call_id: 'c2', content: '7' },
    ]);
    expect(model.calls[2]!.messages.at(-1)).toEqual({ role: 'tool', tool_call_id: 'c3', content: '10' });
  });

  it('turns handler exceptions, unknown tools and malformed arguments into results the model sees', async () => {
    const model = new ScriptedModel([
      {
        toolCalls: [
          { id: 'e1', name: 'fail', arguments: {} },
          { id: 'e2', name: 'nonexistent', arguments: {} },
          { id: 'e3', name: 'add', arguments: '{"a": 1,' },
          { id: 'e4', name: 'add', arguments: '[1, 2]' },
        ],
      },
      'I see the errors.',
    ]);
    let handled = 0;
    await runToolLoop({ model, request: request(), handler: async (name, args) => (handled++, add(name, args)) });
    const results = model.calls[1]!.messages.filter((message) => message.role === 'tool').map((message) => (message as { content: string }).content);
    expect(results[0]).toBe('Error executing fail: database down');
    expect(results[1]).toBe('Error: Unknown tool "nonexistent". Available tools: add, fail.');
    expect(results[2]).toMatch(/^Error: The arguments for add are not valid JSON/);
    expect(results[3]).toBe('Error: The arguments for add must be a JSON object.');
    expect(handled).toBe(1);
  });

  it('stops after 10 model calls with tool_loop_error', async () => {
    const model = new ScriptedModel(() => ({ toolCalls: [{ name: 'add', arguments: { a: 1, b: 1 } }] }));
    const failure = runToolLoop({ model, request: request(), handler: add });
    await expect(failure).rejects.toBeInstanceOf(ToolLoopError);
    await expect(failure).rejects.toMatchObject({ code: 'tool_loop_error', message: 'Maximum tool iterations (10) exceeded' });
    expect(model.calls).toHaveLength(10);
  });

  it('takes a different iteration limit', async () => {
    const model = new ScriptedModel(() => ({ toolCalls: [{ name: 'add', arguments: { a: 1, b: 1 } }] }));
    expect(await rejectionOf(runToolLoop({ model, request: request(), handler: add, maxIterations: 3 }), ToolLoopError)).toMatchObject({ code: 'tool_loop_error', message: expect.stringContaining('Maximum tool iterations (3) exceeded') });
    expect(model.calls).toHaveLength(3);
  });

  it('passes tool_choice through on every call', async () => {
    const model = new ScriptedModel([{ toolCalls: [{ name: 'add', arguments: { a: 1, b: 1 } }] }, 'done']);
    await runToolLoop({ model, request: request({ toolChoice: 'required' }), handler: add });
    expect(model.calls.map((call) => call.toolChoice)).toEqual(['required', 'required']);
  });

  it('refuses tools without a handler', () => {
    expect(thrownBy(() => runToolLoop({ model: new ScriptedModel([]), request: request() }), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/handler is required when tools are provided/) });
  });

  it('holds no scheduler slot while tools run, so a tool may call the model itself', async () => {
    const model = new ScriptedModel((call) => (call.tools ? (call.messages.length === 1 ? { toolCalls: [{ name: 'add', arguments: {} }] } : 'outer done') : 'inner answer'));
    const gateway = new ModelGateway({ models: singleModelProvider(model), scheduler: new ModelScheduler(1), usage: new UsageTracker() });
    const answer = await runToolLoop({
      model: gateway,
      request: request(),
      handler: async () => (await gateway.chat({ model: 'm', messages: [{ role: 'user', content: 'nested' }] })).content,
    });
    expect(answer).toBe('outer done');
    expect(model.calls[2]!.messages.at(-1)).toMatchObject({ role: 'tool', content: 'inner answer' });
  });
});
