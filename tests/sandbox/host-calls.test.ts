import { describe, expect, it } from 'vitest';
import type { HostCall } from '../../src/index.js';
import { createSandbox, inIsolation, ISOLATIONS } from './helpers.js';

function recordingHandler(answer: (call: HostCall) => unknown = (call) => `answer:${call.kind}`) {
  const calls: HostCall[] = [];
  return {
    calls,
    onHostCall: async (call: HostCall) => {
      calls.push(call);
      return answer(call);
    },
  };
}

describe.each(ISOLATIONS)('%s isolation', (isolation) => {
  inIsolation(isolation);

  describe('the host call channel', () => {
    it('makes llm_query look synchronous and also work under await', async () => {
      const host = recordingHandler((call) => (call.kind === 'llm_query' ? `echo ${call.prompt}` : null));
      const sandbox = await createSandbox({ onHostCall: host.onHostCall });
      const result = await sandbox.execute('const a = llm_query("one"); const b = await llm_query("two"); print(a, "|", b)');
      expect(result.stdout).toBe('echo one | echo two\n');
      expect(host.calls).toEqual([
        { kind: 'llm_query', prompt: 'one' },
        { kind: 'llm_query', prompt: 'two' },
      ]);
    });

    it('carries every kind of call through the same entry point', async () => {
      const host = recordingHandler((call) => {
        if (call.kind === 'llm_query_batched' || call.kind === 'rlm_query_batched') return call.prompts.map((p) => `${call.kind}:${p}`);
        if (call.kind === 'tool_call') return { tool: call.name, args: call.arguments };
        if (call.kind === 'tool_results') return null;
        return `${call.kind}:${JSON.stringify(call.prompt)}`;
      });
      const sandbox = await createSandbox({ onHostCall: host.onHostCall });
      const result = await sandbox.execute(
        [
          'print(llm_query_batched(["a", "b"], { model: "small" }))',
          'print(rlm_query("deep", "big-model"))',
          'print(rlm_query_batched(["x"]))',
          'print(tool_handler("get_stats", { id: 3 }))',
          'print(llm_query([{ role: "user", content: "hi" }], { response_format: { type: "json_object" } }))',
        ].join('\n'),
      );
      expect(result.error).toBeUndefined();
      expect(result.stdout).toBe(
        '[ "llm_query_batched:a", "llm_query_batched:b" ]\nrlm_query:"deep"\n[ "rlm_query_batched:x" ]\n{"tool":"get_stats","args":{"id":3}}\nllm_query:[{"role":"user","content":"hi"}]\n',
      );
      expect(host.calls.map((call) => call.kind)).toEqual(['llm_query_batched', 'rlm_query', 'rlm_query_batched', 'tool_call', 'llm_query']);
      expect(host.calls[0]).toMatchObject({ model: 'small' });
      expect(host.calls[1]).toMatchObject({ model: 'big-model' });
      expect(host.calls[4]).toMatchObject({ response_format: { type: 'json_object' } });
    });

    it('turns a failing host handler into an error model code can catch', async () => {
      const sandbox = await createSandbox({
        onHostCall: async () => {
          throw new RangeError('rate limited');
        },
      });
      const result = await sandbox.execute('try { llm_query("q") } catch (e) { print(e.name, e.message, e instanceof Error) }');
      expect(result.stdout).toBe('RangeError rate limited true\n');
    });

    it('validates calls on the host and explains what is wrong', async () => {
      const host = recordingHandler();
      const sandbox = await createSandbox({ onHostCall: host.onHostCall });
      const badMessages = await sandbox.execute('llm_query([{ role: "wizard", content: "x" }])');
      expect(badMessages.error?.name).toBe('TypeError');
      expect(badMessages.error?.message).toMatch(/^llm_query: invalid arguments/);
      const badPrompt = await sandbox.execute('llm_query(42)');
      expect(badPrompt.error?.message).toContain('the prompt must be a string or an array of chat messages');
      const badName = await sandbox.execute('tool_handler(5)');
      expect(badName.error?.message).toContain('tool name must be a string');
      expect(host.calls).toEqual([]);
    });

    it('rejects arguments that cannot be serialized with clear errors', async () => {
      const host = recordingHandler();
      const sandbox = await createSandbox({ onHostCall: host.onHostCall });
      const cases = {
        symbol: 'llm_query([{ role: "user", content: Symbol("s") }])',
        getter: 'tool_handler("t", { get boom() { throw new Error("getter ran") } })',
        proxy: 'tool_handler("t", new Proxy({}, { ownKeys() { throw new Error("trap") } }))',
        cycle: 'const c = {}; c.c = c; tool_handler("t", c)',
        bigint: 'tool_handler("t", { n: 10n })',
        fn: 'tool_handler("t", { f() {} })',
      };
      for (const [label, code] of Object.entries(cases)) {
        const result = await sandbox.execute(code);
        expect(result.error?.name, label).toBe('TypeError');
        expect(result.error?.message, label).toMatch(/arguments cannot be sent to the host/);
      }
      expect(host.calls).toEqual([]);
    });

    it('says when no host handler is configured', async () => {
      const sandbox = await createSandbox();
      const result = await sandbox.execute('llm_query("q")');
      expect(result.error?.message).toBe('llm_query is not available in this sandbox');
    });

    it('keeps calls in program order within a block', async () => {
      const host = recordingHandler((call) => (call.kind === 'tool_call' ? call.arguments.i : null));
      const sandbox = await createSandbox({ onHostCall: host.onHostCall });
      const result = await sandbox.execute('let sum = 0; for (let i = 0; i < 200; i++) sum += Number(tool_handler("n", { i })); sum');
      expect(result.stdout).toBe('19900\n');
      expect(host.calls.map((call) => (call.kind === 'tool_call' ? call.arguments.i : -1))).toEqual([...Array(200).keys()]);
    });

    it('does not count time spent waiting for the host against the block timeout', async () => {
      const sandbox = await createSandbox({
        blockTimeoutMs: 300,
        onHostCall: () => new Promise((resolve) => setTimeout(() => resolve('slow'), 250)),
      });
      const result = await sandbox.execute('const r = [llm_query("a"), llm_query("b"), llm_query("c")]; r.join()');
      expect(result.error).toBeUndefined();
      expect(result.stdout).toBe('"slow,slow,slow"\n');
    });
  });
});
