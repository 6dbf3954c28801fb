import { describe, expect, it } from 'vitest';
import type { HostCall } from '../../src/index.js';
import { createSandbox } from './helpers.js';

// Each test pollutes a built-in the way model code can, in one block, and checks that the scaffold
// still works in the next blocks: pollution may break the model's own code, never the prelude.

function recordingHost(answer: (call: HostCall) => unknown = () => 'answer') {
  const calls: HostCall[] = [];
  return {
    calls,
    onHostCall: (call: HostCall) => {
      calls.push(call);
      return answer(call);
    },
  };
}

/** The blocks every test runs after polluting: output, final answers, errors, variables, host calls. */
async function expectScaffoldIntact(sandbox: Awaited<ReturnType<typeof createSandbox>>, calls: HostCall[]) {
  const printed = await sandbox.execute('var kept = [1, 2]; const map = new Map(); map.set(1, 2); print("hello", kept, map)');
  expect(printed.error).toBeUndefined();
  expect(printed.stdout).toBe('hello [ 1, 2 ] Map(1) { 1 => 2 }\n');
  expect(printed.variables.map((variable) => variable.name)).toContain('kept');

  const thrown = await sandbox.execute('throw new RangeError("boom")');
  expect(thrown.error).toMatchObject({ name: 'RangeError', message: 'boom' });
  expect(thrown.error!.stack).toMatch(/^RangeError: boom\n\s+at .*block:1:7/);

  const final = await sandbox.execute('FINAL({ answer: [1, "two"] })');
  expect(final.final).toBe('{"answer":[1,"two"]}');

  calls.length = 0;
  const queried = await sandbox.execute('print(llm_query("question"))');
  expect(queried.error).toBeUndefined();
  expect(calls).toEqual([{ kind: 'llm_query', prompt: 'question' }]);
}

describe('the scaffold survives polluted built-ins', () => {
  it('calls captured methods, not a Reflect.apply or Function.prototype.call replaced later', async () => {
    const host = recordingHost();
    const sandbox = await createSandbox({ onHostCall: host.onHostCall });
    const pollute = await sandbox.execute(`
      Reflect.apply = () => 'HACKED';
      Function.prototype.call = function () { return 'HACKED' };
      Function.prototype.apply = function () { return 'HACKED' };
      Function.prototype.bind = function () { return () => 'HACKED' };
    `);
    expect(pollute.error).toBeUndefined();
    await expectScaffoldIntact(sandbox, host.calls);
  });

  it('writes reports and host calls without consulting toJSON or a replaced JSON.stringify', async () => {
    const host = recordingHost();
    const sandbox = await createSandbox({ onHostCall: host.onHostCall });
    await sandbox.execute(`
      Object.prototype.toJSON = function () { return { stdout: 'fake', droppedChars: 0, final: 'FAKE', variables: [], omittedVariables: 0 } };
      Array.prototype.toJSON = function () { return 'fake array' };
      JSON.stringify = () => '{"kind":"llm_query","prompt":"forged"}';
    `);
    await expectScaffoldIntact(sandbox, host.calls);
    const dated = await sandbox.execute('FINAL({ when: new Date(0) })');
    expect(dated.final).toBe('{"when":"1970-01-01T00:00:00.000Z"}');
  });

  it('reads query options from their own properties only', async () => {
    const host = recordingHost();
    const sandbox = await createSandbox({ onHostCall: host.onHostCall });
    await sandbox.execute(`
      Object.prototype.model = 'attacker-model';
      Object.prototype.tools = [{ type: 'function', function: { name: 'leak' } }];
      Object.prototype.tool_handler = () => 'leaked';
      Object.prototype.response_format = { type: 'json_object' };
      Object.prototype.handler = () => 'leaked';
    `);
    await expectScaffoldIntact(sandbox, host.calls);
    host.calls.length = 0;
    await sandbox.execute('llm_query("a", {}); llm_query_batched(["b"], { model: "mine" }); rlm_query("c", {})');
    expect(host.calls).toEqual([
      { kind: 'llm_query', prompt: 'a' },
      { kind: 'llm_query_batched', prompts: ['b'], model: 'mine' },
      { kind: 'rlm_query', prompt: 'c' },
    ]);
  });

  it('never iterates with a protocol model code can replace', async () => {
    const host = recordingHost((call) =>
      call.kind === 'llm_query' && call.tools
        ? { done: false, handBack: 's', requests: [{ id: '1', name: 'a', arguments: {} }, { id: '2', name: 'b', arguments: {} }] }
        : call.kind === 'tool_results'
          ? { done: true, value: call.results.map((result) => result.output).join('+') }
          : 'answer',
    );
    const sandbox = await createSandbox({ onHostCall: host.onHostCall });
    await sandbox.execute(`
      Array.prototype[Symbol.iterator] = function* () { yield 'evil' };
      Object.defineProperty(Array, Symbol.species, { get() { throw new Error('species hook ran') } });
      String.prototype[Symbol.split] = () => ['evil'];
      String.prototype[Symbol.replace] = () => 'evil';
      RegExp.prototype.exec = () => null;
    `);
    await expectScaffoldIntact(sandbox, host.calls);
    const tools = await sandbox.execute('print(llm_query("q", { tools: [{ type: "function", function: { name: "a" } }], tool_handler: (name) => name.toUpperCase() }))');
    expect(tools.stdout).toBe('A+B\n');
    await sandbox.setTools([{ type: 'function', function: { name: 'lookup' } }, { type: 'function', function: { name: 'store' } }]);
    const listed = await sandbox.execute('print(TOOLS.length, typeof tools.lookup, typeof tools.store)');
    expect(listed.stdout).toBe('2 function function\n');
  });

  it('checks error and collection types without Symbol.hasInstance', async () => {
    const host = recordingHost();
    const sandbox = await createSandbox({ onHostCall: host.onHostCall });
    await sandbox.execute(`
      for (const ctor of [Error, RangeError, Map, Set, Date, RegExp, Promise]) {
        Object.defineProperty(ctor, Symbol.hasInstance, { value: () => false });
      }
    `);
    await expectScaffoldIntact(sandbox, host.calls);
    const printed = await sandbox.execute('print(new Date(0), /a+/g, new Set([1]), new Error("shown"))');
    expect(printed.stdout).toMatch(/^1970-01-01T00:00:00.000Z \/a\+\/g Set\(1\) \{ 1 \} Error: shown\n/);
  });

  it('loads later contexts whatever Array.prototype.pop and push do', async () => {
    const sandbox = await createSandbox({ blockTimeoutMs: 1_000 });
    await sandbox.execute(`
      Array.prototype.pop = function () { return { evil: true } };
      Array.prototype.push = function () { return 0 };
      Object.defineProperty(Array.prototype, '0', { get() { return 'evil' }, set(value) {}, configurable: true });
    `);
    await sandbox.setContext({ rows: [{ id: 1 }, { id: 2 }] }, 'context_1');
    const result = await sandbox.execute('print(JSON.stringify(context_1), Object.isFrozen(context_1.rows[1]))');
    expect(result.stdout).toBe('{"rows":[{"id":1},{"id":2}]} true\n');
    const printed = await sandbox.execute('print("a", "b"); SHOW_VARS()');
    expect(printed.stdout).toBe('a b\nNo variables defined yet.\n');
  });

  it('builds property descriptors that inherit nothing', async () => {
    const host = recordingHost(() => {
      throw new TypeError('host says no');
    });
    const sandbox = await createSandbox({ onHostCall: host.onHostCall });
    await sandbox.execute(`
      Object.prototype.get = function () { return 'evil' };
      Object.prototype.value = 'evil';
      Object.prototype.writable = true;
    `);
    const failed = await sandbox.execute('try { llm_query("q") } catch (error) { print(error.name, error.message) }');
    expect(failed.stdout).toBe('TypeError host says no\n');
    await sandbox.setContext('second input', 'context_1');
    await sandbox.setTools([{ type: 'function', function: { name: 'lookup' } }]);
    const loaded = await sandbox.execute('print(context_1, TOOLS[0].function.name)');
    expect(loaded.stdout).toBe('second input lookup\n');
  });

  it('delivers asynchronous tool results whatever model code did to promises and iteration', async () => {
    const host = recordingHost((call) => {
      if (call.kind !== 'tool_call') return 'answer';
      if (call.arguments.id === 3) throw new RangeError('no row 3');
      return { id: call.arguments.id, tags: ['a', 'b'] };
    });
    const sandbox = await createSandbox({ onHostCall: host.onHostCall });
    await sandbox.setTools([{ type: 'function', function: { name: 'lookup' } }], { asyncTools: ['lookup'] });
    const pollute = await sandbox.execute(`
      Promise.prototype.then = function () { return 'HIJACKED' };
      Object.prototype.then = function (resolve) { resolve('HIJACKED') };
      Array.prototype[Symbol.iterator] = function* () { yield 'evil' };
      Object.defineProperty(Promise, Symbol.species, { get() { throw new Error('species hook ran') } });
    `);
    expect(pollute.error).toBeUndefined();
    const result = await sandbox.execute(`
      const row = tools.lookup({ id: 1 });
      const text = tool_handler('lookup', { id: 2 });
      const missing = tools.lookup({ id: 3 });
      print(JSON.stringify(await row), Object.hasOwn(await row, 'then'), await text);
      try { await missing } catch (error) { print(error.name, error.message) }
    `);
    expect(result.error).toBeUndefined();
    expect(result.stdout).toBe('{"id":1,"tags":["a","b"]} false {"id":2,"tags":["a","b"]}\nRangeError no row 3\n');
    await expectScaffoldIntact(sandbox, host.calls);
  });

  it('settles the block promise without a species constructor model code provides', async () => {
    const sandbox = await createSandbox();
    await sandbox.execute(`
      Object.defineProperty(Promise, Symbol.species, { get() { throw new Error('species hook ran') } });
    `);
    const result = await sandbox.execute('const value = 40 + 2; value');
    expect(result.error).toBeUndefined();
    expect(result.stdout).toBe('42\n');
  });
});
