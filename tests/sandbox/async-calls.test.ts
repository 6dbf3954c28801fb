import { describe, expect, it } from 'vitest';
import { ConfigurationError, type HostCall, type Sandbox, type SandboxOptions } from '../../src/index.js';
import { createSandbox, inIsolation, ISOLATIONS } from './helpers.js';
import { thrownBy } from '../rejection.js';

const ASYNC_TOOLS = ['fetch_row', 'search'];
const TOOL_SPECS = [...ASYNC_TOOLS, 'count'].map((name) => ({ type: 'function' as const, function: { name } }));

type ToolCall = Extract<HostCall, { kind: 'tool_call' }>;

interface HeldCall {
  call: ToolCall;
  signal: AbortSignal;
  settle: () => void;
}

/**
 * A host that holds every call to an asynchronous tool until the block says it is waiting, then
 * answers all of them, newest first (so results cannot line up by the order of the answers). That
 * is how a server that hands calls to its own client works. Other calls are answered at once.
 */
function batchingHost(answer: (call: ToolCall) => unknown = (call) => `${call.name}:${JSON.stringify(call.arguments)}`, delayMs = 0) {
  const held: HeldCall[] = [];
  const calls: HostCall[] = [];
  const waits: { scope: unknown; pendingCalls: number; heldCalls: number }[] = [];
  const answerHeld = () => {
    for (const entry of held.splice(0).reverse()) entry.settle();
  };
  const onHostCall: SandboxOptions['onHostCall'] = (call, { signal }) => {
    calls.push(call);
    if (call.kind !== 'tool_call' || !ASYNC_TOOLS.includes(call.name)) return call.kind === 'llm_query' ? `sync answer to ${call.prompt}` : 7;
    return new Promise((resolve, reject) => {
      const settle = () => {
        try {
          resolve(answer(call));
        } catch (error) {
          reject(error);
        }
      };
      held.push({ call, signal, settle });
    });
  };
  const onBlockWaiting: SandboxOptions['onBlockWaiting'] = ({ scope, pendingCalls }) => {
    waits.push({ scope, pendingCalls, heldCalls: held.length });
    if (delayMs > 0) setTimeout(answerHeld, delayMs);
    else answerHeld();
  };
  return { held, calls, waits, answerHeld, options: { onHostCall, onBlockWaiting } };
}

async function sandboxWithTools(options: SandboxOptions): Promise<Sandbox> {
  const sandbox = await createSandbox(options);
  await sandbox.setTools(TOOL_SPECS, { asyncTools: ASYNC_TOOLS });
  return sandbox;
}

function spin(ms: number): string {
  return `{ const until = Date.now() + ${ms}; while (Date.now() < until) {} }`;
}

describe.each(ISOLATIONS)('%s isolation', (isolation) => {
  inIsolation(isolation);

  describe('asynchronous tool calls', () => {
    it('reach the host together from Promise.all and come back in order', async () => {
      const host = batchingHost();
      const sandbox = await sandboxWithTools(host.options);
      const result = await sandbox.execute(
        'const [row, hits] = await Promise.all([tools.fetch_row({ id: 1 }), tool_handler("search", { q: "x" })]); print(row, "|", hits)',
        { scope: 'turn-1' },
      );
      expect(result.error).toBeUndefined();
      expect(result.stdout).toBe('fetch_row:{"id":1} | search:{"q":"x"}\n');
      expect(host.waits).toEqual([{ scope: 'turn-1', pendingCalls: 2, heldCalls: 2 }]);
      expect(host.calls).toEqual([
        { kind: 'tool_call', name: 'fetch_row', arguments: { id: 1 } },
        { kind: 'tool_call', name: 'search', arguments: { q: 'x' } },
      ]);
    });

    it('resolve tools.NAME to the value and tool_handler to its text, while other tools stay synchronous', async () => {
      const host = batchingHost(() => ({ rows: [1, 2] }));
      const sandbox = await sandboxWithTools(host.options);
      const result = await sandbox.execute(`
        const value = tools.fetch_row({});
        const text = tool_handler('fetch_row', {});
        print(value instanceof Promise, text instanceof Promise, tools.count({}), typeof tool_handler('count', {}));
        print((await value).rows.length, await text);
      `);
      expect(result.error).toBeUndefined();
      expect(result.stdout).toBe('true true 7 string\n2 {"rows":[1,2]}\n');
    });

    it('make one round trip per await when awaited one after another', async () => {
      const host = batchingHost();
      const sandbox = await sandboxWithTools(host.options);
      const result = await sandbox.execute('const a = await tools.fetch_row({ id: 1 }); const b = await tools.search({ after: a }); print(b)');
      expect(result.stdout).toBe('search:{"after":"fetch_row:{\\"id\\":1}"}\n');
      expect(host.waits.map((wait) => [wait.pendingCalls, wait.heldCalls])).toEqual([
        [1, 1],
        [1, 1],
      ]);
    });

    it('turn a failed call into an error model code can catch', async () => {
      const host = batchingHost((call) => {
        throw call.name === 'search' ? new RangeError('quota exceeded') : new Error('not found');
      });
      const sandbox = await sandboxWithTools(host.options);
      const result = await sandbox.execute(`
        for (const call of [() => tools.search({}), () => tool_handler('fetch_row', {}), () => tools.search({ f() {} })]) {
          try { await call() } catch (error) { print(error.name, error.message, error instanceof Error) }
        }
      `);
      expect(result.error).toBeUndefined();
      expect(result.stdout).toMatch(/^RangeError quota exceeded true\nError not found true\nTypeError tools\.search: the arguments cannot be sent to the host .* true\n$/);
      expect(host.calls).toHaveLength(2);
    });

    it('keep a failure for the await that comes after other awaits', async () => {
      // The host answers the later call first: its failure arrives while the block awaits the other.
      const host = batchingHost((call) => {
        if (call.name === 'search') throw new Error('search is down');
        return 'row';
      });
      const sandbox = await sandboxWithTools(host.options);
      const result = await sandbox.execute(`
        const row = tools.fetch_row({});
        const hits = tools.search({});
        print(await row);
        try { await hits } catch (error) { print(error.message) }
      `);
      expect(result.error).toBeUndefined();
      expect(result.stdout).toBe('row\nsearch is down\n');
    });

    for (const [label, length] of [
      ['64 KB', 64 * 1024],
      ['1 MB', 2 ** 20],
    ] as const) {
      it(`carry a result of ${label} intact`, async () => {
        const text = 'abcdéü€–xyz0123456789'.repeat(Math.ceil(length / 21)).slice(0, length);
        const host = batchingHost(() => text);
        const sandbox = await sandboxWithTools(host.options);
        const result = await sandbox.execute(`
          const [value, viaHandler] = await Promise.all([tools.fetch_row({}), tool_handler('search', {})]);
          print(value.length, value === viaHandler, value.slice(0, 12), value.slice(-5));
        `);
        expect(result.error).toBeUndefined();
        expect(result.stdout).toBe(`${length} true ${text.slice(0, 12)} ${text.slice(-5)}\n`);
      });
    }

    it('do not count the wait against the block timeout, but count the computation around it', async () => {
      const slowHost = batchingHost(() => 'late', 1_500);
      const slowSandbox = await sandboxWithTools({ blockTimeoutMs: 500, ...slowHost.options });
      const started = performance.now();
      const slow = await slowSandbox.execute('const answer = await tools.fetch_row({}); answer');
      expect(slow.error).toBeUndefined();
      expect(slow.stdout).toBe('"late"\n');
      expect(performance.now() - started).toBeGreaterThan(1_400);

      const sandbox = await sandboxWithTools({ blockTimeoutMs: 500, ...batchingHost(() => 'soon', 50).options });
      const looping = await sandbox.execute('await tools.fetch_row({}); while (true) {}');
      expect(looping.error?.name).toBe('TimeoutError');
      expect(looping.error?.message).toContain('more than 500 ms of execution time');
      expect(looping.reset).toBe(false);

      const split = await sandbox.execute(`${spin(300)}; await tools.fetch_row({}); ${spin(300)}; print("not reached")`);
      expect(split.error?.name).toBe('TimeoutError');
      expect(split.stdout).toBe('');
    }, 15_000);

    it('let a block end without awaiting them, and abort them on the host', async () => {
      const host = batchingHost();
      const sandbox = await sandboxWithTools(host.options);
      const result = await sandbox.execute('const forgotten = tools.fetch_row({ id: 1 }); print("done")');
      expect(result.error).toBeUndefined();
      expect(result.stdout).toMatch(/^done\nNote: this block never awaited 1 call to tools\.fetch_row: it ended without the results, which are lost\. /);
      expect(host.waits).toEqual([]);
      expect(host.held).toHaveLength(1);
      expect(host.held[0]!.signal.aborted).toBe(true);

      // Its late answer must not reach a later block's call.
      host.answerHeld();
      const next = await sandbox.execute('print(await tools.fetch_row({ id: 2 }))');
      expect(next.stdout).toBe('fetch_row:{"id":2}\n');
    });

    it('end a block that never awaited some of them with a note naming them and saying to await them', async () => {
      const host = batchingHost();
      const sandbox = await sandboxWithTools(host.options);
      const result = await sandbox.execute(`
        tools.fetch_row({ id: 1 });
        tools.fetch_row({ id: 2 });
        tool_handler('search', { q: 'x' });
        const kept = await tools.search({ q: 'awaited' });
        print(kept)`);
      expect(result.error).toBeUndefined();
      const [printed, note] = result.stdout.split('\n');
      expect(printed).toBe('search:{"q":"awaited"}');
      // All four went out together when the block awaited; the three it never awaited lost their results.
      expect(host.waits.map((wait) => wait.heldCalls)).toEqual([4]);
      expect(note).toContain('never awaited 2 calls to tools.fetch_row, 1 call to tool_handler("search"): it ended without the results, which are lost');
      expect(note).toContain('await tools.NAME(args)');
      expect(result.stdout.endsWith('\n')).toBe(true);
    });

    it('refuse a FINAL from a block that never awaited its calls: the answer cannot hold their results', async () => {
      const host = batchingHost();
      const sandbox = await sandboxWithTools(host.options);
      const result = await sandbox.execute('const row = tools.fetch_row({ id: 1 }); FINAL(`the row is ${row}`)');
      expect(result.final).toBeUndefined();
      expect(result.error?.name).toBe('UnawaitedCallError');
      expect(result.error?.message).toMatch(/^FINAL was not accepted: this block ended with tool calls it never awaited/);
      expect(result.stdout).toContain('never awaited 1 call to tools.fetch_row');

      const fixed = await sandbox.execute('const awaited = await tools.fetch_row({ id: 1 }); FINAL(`the row is ${awaited}`)');
      expect(fixed.error).toBeUndefined();
      expect(fixed.final).toBe('the row is fetch_row:{"id":1}');
      expect(fixed.stdout).toBe('');
    });

    it('refuse FINAL of a call\'s promise, saying to await it, and take the awaited value', async () => {
      const host = batchingHost();
      const sandbox = await sandboxWithTools(host.options);
      for (const code of ['FINAL(tools.fetch_row({ id: 1 }))', 'FINAL(tool_handler("search", {}))', 'const pending = tools.fetch_row({}); FINAL_VAR("pending")']) {
        const result = await sandbox.execute(code);
        expect(result.final, code).toBeUndefined();
        expect(result.error?.name, code).toBe('TypeError');
        expect(result.error?.message, code).toMatch(/got a Promise, not its value: await it first: FINAL\(await (x|pending)\)/);
      }
      expect((await sandbox.execute('FINAL(await tools.fetch_row({ id: 1 }))')).final).toBe('fetch_row:{"id":1}');
    });

    it('keep synchronous calls working before and after an await', async () => {
      const host = batchingHost();
      const sandbox = await sandboxWithTools(host.options);
      const result = await sandbox.execute(`
        const pending = tools.fetch_row({ id: 1 });
        const before = llm_query('before');
        const row = await pending;
        print(before, '|', row, '|', llm_query('after'), tools.count({}));
      `);
      expect(result.error).toBeUndefined();
      expect(result.stdout).toBe('sync answer to before | fetch_row:{"id":1} | sync answer to after 7\n');
      expect(host.calls.map((call) => call.kind)).toEqual(['tool_call', 'llm_query', 'llm_query', 'tool_call']);
    });

    it('keep an answer that arrives while a synchronous call waits', async () => {
      const waits: number[] = [];
      const sandbox = await sandboxWithTools({
        onHostCall: (call) =>
          call.kind === 'llm_query' ? new Promise((resolve) => setTimeout(() => resolve('slow sync'), 100)) : 'quick async',
        onBlockWaiting: ({ pendingCalls }) => waits.push(pendingCalls),
      });
      const result = await sandbox.execute('const pending = tools.search({}); const text = llm_query("q"); print(text, await pending)');
      expect(result.error).toBeUndefined();
      expect(result.stdout).toBe('slow sync quick async\n');
      expect(waits).toEqual([]);
    });

    it('send a batch of 200 calls together and resolve them all', async () => {
      const host = batchingHost((call) => (call.arguments.i as number) * 2);
      const sandbox = await sandboxWithTools(host.options);
      const result = await sandbox.execute(`
        const doubled = await Promise.all(Array.from({ length: 200 }, (_, i) => tools.fetch_row({ i })));
        print(doubled.length, doubled.every((value, i) => value === i * 2));
      `);
      expect(result.error).toBeUndefined();
      expect(result.stdout).toBe('200 true\n');
      expect(host.waits).toEqual([{ scope: undefined, pendingCalls: 200, heldCalls: 200 }]);
    });

    it('let the watchdog kill a worker that stops while some calls are still out', async () => {
      let stopWorker = () => {};
      const calls: { name: string; resolve: (value: unknown) => void }[] = [];
      const sandbox = await sandboxWithTools({
        blockTimeoutMs: 200,
        onHostCall: (call) => new Promise((resolve) => calls.push({ name: (call as ToolCall).name, resolve })),
        onBlockWaiting: () => {
          // One answer lets the block go on; the other call stays out while the worker is frozen.
          calls.find((call) => call.name === 'fetch_row')!.resolve('first');
          stopWorker();
        },
      });
      stopWorker = () => process.kill(sandbox.processId!, 'SIGSTOP');
      const result = await sandbox.execute('const never = tools.search({}); await tools.fetch_row({}); await never');
      expect(result.error?.name).toBe('TimeoutError');
      expect(result.error?.message).toContain('could not be interrupted');
      expect(result.reset).toBe(true);
    }, 15_000);

    it('refuse async tool names that are not among the tools', async () => {
      const sandbox = await createSandbox();
      expect(thrownBy(() => sandbox.setTools(TOOL_SPECS, { asyncTools: ['fetch_row', 'missing'] }), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/not among the specs: "missing"/) });
    });
  });

  describe('an onBlockWaiting handler that throws', () => {
    it('fails the block\'s calls instead of the host', async () => {
      const sandbox = await createSandbox({
        onHostCall: () => new Promise(() => {}),
        onBlockWaiting: () => {
          throw new Error('embedder bug');
        },
      });
      await sandbox.setTools([{ type: 'function', function: { name: 'slow' } }], { asyncTools: ['slow'] });
      const result = await sandbox.execute('try { await tools.slow({}) } catch (error) { print("caught:", error.message) }');
      expect(result.stdout).toMatch(/^caught: /);
    });
  });
});
