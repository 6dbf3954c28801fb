import { describe, expect, it } from 'vitest';
import { LlmQueries } from '../../src/engine/llm-queries.js';
import type { ReplyFunction } from '../../src/testing.js';
import { routeHostCall } from '../../src/engine/host-calls.js';
import { singleModelProvider } from '../../src/lm/provider.js';
import type { ModelCallEvent } from '../../src/index.js';
import { ModelGateway } from '../../src/lm/gateway.js';
import { ModelScheduler } from '../../src/lm/scheduler.js';
import { UsageTracker } from '../../src/lm/usage.js';
import { ScriptedModel, type ScriptedReply } from '../../src/testing.js';
import { createSandbox } from '../sandbox/helpers.js';

async function sandboxWithModel(script: ScriptedReply[] | ReplyFunction, concurrency = 16) {
  const model = new ScriptedModel(script);
  const events: ModelCallEvent[] = [];
  const gateway = new ModelGateway({ models: singleModelProvider(model), scheduler: new ModelScheduler(concurrency), usage: new UsageTracker(), depth: 1, onEvent: (event) => events.push(event) });
  const queries = new LlmQueries({ gateway, defaultModel: 'sub-default', maxToolIterations: 10 });
  const sandbox = await createSandbox({ blockTimeoutMs: 5_000, onHostCall: (call, { signal }) => routeHostCall({ call, signal, scope: { queries, subcalls: [], toolCalls: [], services: {}, runSignal: signal } }) });
  return { sandbox, model, events, gateway };
}

const lastUserText = (request: { messages: unknown[] }) => {
  const last = request.messages.at(-1) as { content?: unknown };
  return typeof last.content === 'string' ? last.content : JSON.stringify(last.content);
};

describe('llm_query from sandbox code', () => {
  it('sends a string prompt to the default sub-model', async () => {
    const { sandbox, model } = await sandboxWithModel(['forty-two']);
    const result = await sandbox.execute('const answer = llm_query("What is 6 x 7?"); print(answer)');
    expect(result.stdout).toBe('forty-two\n');
    expect(model.calls[0]).toMatchObject({ model: 'sub-default', messages: [{ role: 'user', content: 'What is 6 x 7?' }] });
  });

  it('takes a model as the second argument or in options, chat messages, and response_format', async () => {
    const { sandbox, model } = await sandboxWithModel(['a', 'b']);
    await sandbox.execute(`
      llm_query("x", "gpt-positional");
      llm_query([{ role: "system", content: "be brief" }, { role: "user", content: "y" }], { model: "gpt-option", response_format: { type: "json_object" } });
    `);
    expect(model.calls[0]!.model).toBe('gpt-positional');
    expect(model.calls[1]).toMatchObject({
      model: 'gpt-option',
      messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'y' }],
      responseFormat: { type: 'json_object' },
    });
  });

  it('surfaces a failed model call as an error the code can catch', async () => {
    const { sandbox } = await sandboxWithModel([new Error('rate limited')]);
    const result = await sandbox.execute('try { llm_query("q") } catch (e) { print("caught:", e.message) }');
    expect(result.stdout).toBe('caught: rate limited\n');
  });

  it('keeps batch order, runs concurrently, and lets one failing item not fail the batch', async () => {
    const { sandbox, events } = await sandboxWithModel((request) => {
      const text = lastUserText(request);
      if (text === 'p3') return new Error('model overloaded');
      return { content: `answer-${text}`, delayMs: 60 - Number(text.slice(1)) * 10 };
    });
    const result = await sandbox.execute('FINAL(llm_query_batched(["p0", "p1", "p2", "p3", "p4"]))');
    expect(JSON.parse(result.final!)).toEqual(['answer-p0', 'answer-p1', 'answer-p2', 'Error: model overloaded', 'answer-p4']);
    const starts = events.filter((event) => event.type === 'llm-call-start').length;
    expect(starts).toBe(5);
    // All five were running before the first finished.
    const firstEnd = events.findIndex((event) => event.type === 'llm-call-end');
    expect(events.slice(0, firstEnd).filter((event) => event.type === 'llm-call-running')).toHaveLength(5);
  });
});

describe('llm_query with tools and a sandbox tool handler', () => {
  const TOOLS = `const TOOLS = [{ type: "function", function: { name: "get_stats", parameters: { type: "object", properties: { q: { type: "string" } } } } }];`;

  it('runs the loop with the handler written in sandbox JavaScript', async () => {
    const { sandbox, model } = await sandboxWithModel([
      { toolCalls: [{ id: 't1', name: 'get_stats', arguments: { q: 'q1' } }, { id: 't2', name: 'get_stats', arguments: { q: 'q2' } }] },
      'q1 averages 4.2, q2 averages 3.8',
    ]);
    const result = await sandbox.execute(`${TOOLS}
      const seen = [];
      const handler = (name, args) => { seen.push(name + ":" + args.q); return { avg: args.q === "q1" ? 4.2 : 3.8 } };
      const answer = llm_query("Compare q1 and q2", { tools: TOOLS, tool_handler: handler, tool_choice: "auto" });
      print(answer); print(seen)`);
    expect(result.error).toBeUndefined();
    expect(result.stdout).toBe('q1 averages 4.2, q2 averages 3.8\n[ "get_stats:q1", "get_stats:q2" ]\n');
    expect(model.calls[0]!.toolChoice).toBe('auto');
    expect(model.calls[1]!.messages.slice(-2)).toEqual([
      { role: 'tool', tool_call_id: 't1', content: '{"avg":4.2}' },
      { role: 'tool', tool_call_id: 't2', content: '{"avg":3.8}' },
    ]);
  });

  it('reports handler exceptions to the model as "Error executing NAME: message"', async () => {
    const { sandbox, model } = await sandboxWithModel([{ toolCalls: [{ name: 'get_stats', arguments: { q: 'x' } }] }, 'handled']);
    const result = await sandbox.execute(`${TOOLS} llm_query("q", { tools: TOOLS, tool_handler: () => { throw new Error("db down") } })`);
    expect(result.stdout).toBe('"handled"\n');
    expect(model.calls[1]!.messages.at(-1)).toMatchObject({ role: 'tool', content: 'Error executing get_stats: db down' });
  });

  it('throws a catchable error when tools come without a handler', async () => {
    const { sandbox, model } = await sandboxWithModel([]);
    const result = await sandbox.execute(`${TOOLS} try { llm_query("q", { tools: TOOLS }) } catch (e) { print(e.name, e.message) }`);
    expect(result.stdout).toBe('TypeError llm_query: tool_handler is required when tools are provided (a function (name, args) => result).\n');
    expect(model.calls).toHaveLength(0);
  });

  it('ends a runaway loop with a catchable tool_loop_error, and marks the item in a batch', async () => {
    const { sandbox } = await sandboxWithModel((request) =>
      lastUserText(request) === 'fine' ? 'fine answer' : { toolCalls: [{ name: 'get_stats', arguments: {} }] },
    );
    const single = await sandbox.execute(`${TOOLS} try { llm_query("loop", { tools: TOOLS, tool_handler: () => 1 }) } catch (e) { print(e.name + ": " + e.message) }`);
    expect(single.stdout).toBe('ToolLoopError: Maximum tool iterations (10) exceeded\n');
    const batch = await sandbox.execute(`llm_query_batched(["loop", "fine"], { tools: TOOLS, tool_handler: () => 1 })`);
    expect(batch.stdout).toBe('[ "Error: ToolLoopError: Maximum tool iterations (10) exceeded", "fine answer" ]\n');
  });

  it('runs the model calls of a batch concurrently even though the handler is sandbox code', async () => {
    let inFlight = 0;
    let peak = 0;
    const { sandbox } = await sandboxWithModel(async (request) => {
      peak = Math.max(peak, ++inFlight);
      await new Promise((resolve) => setTimeout(resolve, 40));
      inFlight--;
      const rounds = request.messages.filter((message) => message.role === 'tool').length;
      return rounds < 2 ? { toolCalls: [{ name: 'get_stats', arguments: { q: lastUserText(request) } }] } : `done ${request.messages[0]!.content}`;
    });
    const started = Date.now();
    const result = await sandbox.execute(`${TOOLS}
      let calls = 0;
      llm_query_batched(["a", "b", "c", "d", "e", "f"], { tools: TOOLS, tool_handler: (name, args) => { calls++; return "stat" } })`);
    const elapsed = Date.now() - started;
    expect(result.stdout).toBe('[ "done a", "done b", "done c", "done d", "done e", "done f" ]\n');
    expect(peak).toBe(6);
    // Three rounds of 40 ms each; run one prompt after another it would take 18 rounds.
    expect(elapsed).toBeLessThan(18 * 40);
  });

  it('rejects a handler that returns a promise with a clear result for the model', async () => {
    const { sandbox, model } = await sandboxWithModel([{ toolCalls: [{ name: 'get_stats', arguments: {} }] }, 'ok']);
    await sandbox.execute(`${TOOLS} llm_query("q", { tools: TOOLS, tool_handler: async () => 1 })`);
    expect(model.calls[1]!.messages.at(-1)).toMatchObject({ content: expect.stringContaining('returned a Promise') });
  });
});
