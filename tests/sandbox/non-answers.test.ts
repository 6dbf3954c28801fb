import { describe, expect, it } from 'vitest';
import { createSandbox, runBlocks } from './helpers.js';

// A value that is not an answer (a Promise, undefined) must reach the model as an error it can
// fix, never the caller as the answer "[object Promise]", "{}" or "undefined".

describe('FINAL refuses what is not an answer', () => {
  it('refuses a Promise with an error the code can catch, saying to await it', async () => {
    const sandbox = await createSandbox();
    const refused = await sandbox.execute('FINAL(Promise.resolve(1))');
    expect(refused.final).toBeUndefined();
    expect(refused.error).toMatchObject({ name: 'TypeError', message: expect.stringMatching(/^FINAL got a Promise, not its value: await it first: FINAL\(await x\)\./) });

    const caught = await sandbox.execute('try { FINAL(Promise.resolve(1)) } catch (error) { print(error.message.slice(0, 20)) }');
    expect(caught).toMatchObject({ stdout: 'FINAL got a Promise,\n' });
    expect(caught.final).toBeUndefined();
    expect((await sandbox.execute('FINAL(await Promise.resolve(1))')).final).toBe('1');
  });

  it('refuses pending promises, async results, thenables and their string form', async () => {
    const sandbox = await createSandbox();
    const values = [
      'new Promise(() => {})',
      '(async () => 1)()',
      '{ then(resolve) { resolve(1) } }',
      '{ [Symbol.toStringTag]: "Promise" }',
      'String(Promise.resolve(1))',
      '`${Promise.resolve(1)}`',
      'new Proxy(Promise.resolve(1), {})',
    ];
    for (const value of values) {
      const result = await sandbox.execute(`FINAL(${value})`);
      expect(result.final, value).toBeUndefined();
      expect(result.error?.message, value).toMatch(/^FINAL got a Promise/);
    }
  });

  it('never runs a getter `then` to decide: one that throws or loops is refused at once', async () => {
    const sandbox = await createSandbox({ blockTimeoutMs: 10_000 });
    for (const getter of ['throw new Error("getter ran")', 'for (;;) {}']) {
      const result = await sandbox.execute(`FINAL({ get then() { ${getter} } })`);
      expect(result.error?.name, getter).toBe('TypeError');
      expect(result.error?.message, getter).toMatch(/^FINAL got a Promise/);
      expect(result.durationMs, getter).toBeLessThan(5_000);
    }
  });

  it('takes objects whose `then` comes only from a polluted prototype as the plain data they are', async () => {
    const sandbox = await createSandbox();
    await sandbox.execute('Object.prototype.then = function (resolve) { resolve("HIJACKED") }; Object.prototype[Symbol.toStringTag] = "Promise"');
    expect((await sandbox.execute('FINAL({ answer: 42 })')).final).toBe('{"answer":42}');
  });

  it('survives a Proxy whose traps throw, given to FINAL, thrown, or left as the value, and the sandbox goes on', async () => {
    const sandbox = await createSandbox();
    const traps = ['getPrototypeOf', 'getOwnPropertyDescriptor', 'ownKeys', 'get', 'has'].map((trap) => `${trap}() { throw new Error("trap") }`).join(', ');
    await sandbox.execute(`var hostile = new Proxy(new Error("x"), { ${traps} })`);
    for (const code of ['FINAL(hostile)', 'throw hostile', 'hostile']) {
      const result = await sandbox.execute(code);
      expect(result.reset, code).toBe(false);
    }
    expect((await sandbox.execute('throw hostile')).error?.message).toBe('the block threw a value that cannot be described');
    expect((await sandbox.execute('print("still here")')).stdout).toBe('still here\n');
  });

  it('refuses undefined, from FINAL and from FINAL_VAR given a value', async () => {
    const sandbox = await createSandbox();
    for (const code of ['FINAL(undefined)', 'FINAL((() => {})())', 'FINAL_VAR(undefined)']) {
      const result = await sandbox.execute(code);
      expect(result.final, code).toBeUndefined();
      expect(result.error?.message, code).toMatch(/got undefined, not an answer/);
    }
    expect((await sandbox.execute('FINAL(null)')).final).toBe('null');
  });
});

describe('FINAL_VAR refuses a variable that holds no answer', () => {
  it('refuses a variable that exists but is undefined (its block threw) like a missing one', async () => {
    const sandbox = await createSandbox();
    const threw = await sandbox.execute('const result = (() => { throw new Error("boom") })()');
    expect(threw.error?.message).toBe('boom');
    const lookup = await sandbox.execute('FINAL_VAR("result")');
    expect(lookup.final).toBeUndefined();
    expect(lookup.stdout).toMatch(/^FINAL_VAR error: the variable "result" is undefined, so it holds no answer \(was the block that sets it stopped by an error\?\)\. .*The run continues\.\n$/);

    await sandbox.execute('result = "now set"');
    expect((await sandbox.execute('FINAL_VAR("result")')).final).toBe('now set');
  });

  it('refuses a variable holding a Promise, saying to await it', async () => {
    const sandbox = await createSandbox();
    const result = await runBlocks(sandbox, 'var pending = Promise.resolve("late")', 'FINAL_VAR("pending")');
    expect(result.final).toBeUndefined();
    expect(result.error?.message).toMatch(/^FINAL_VAR\("pending"\) got a Promise, not its value: await it first: FINAL\(await pending\)\./);
  });
});

describe('a block whose report runs model code that never returns', () => {
  const hostileBlocks = {
    'an enumerable global getter that loops': "Object.defineProperty(globalThis, 'x', { get() { for (;;) {} }, enumerable: true }); print('printed')",
    'a Proxy in a global whose traps loop': "globalThis.p = new Proxy({}, { getPrototypeOf() { for (;;) {} }, ownKeys() { for (;;) {} }, getOwnPropertyDescriptor() { for (;;) {} } }); print('printed')",
    'a Proxy as the value of its last expression': "print('printed'); new Proxy({}, { ownKeys() { for (;;) {} } })",
    'a thrown Proxy whose traps loop': "print('printed'); throw new Proxy(new Error('x'), { getOwnPropertyDescriptor() { for (;;) {} } })",
  };

  it.each(Object.entries(hostileBlocks))('times out on %s, is reset, and the next block works', async (_name, code) => {
    const sandbox = await createSandbox({ blockTimeoutMs: 1_000 });
    await sandbox.setContext('kept');
    await sandbox.execute('var before = 1');
    const hostile = await sandbox.execute(code);
    expect(hostile.error?.name).toBe('TimeoutError');
    expect(hostile.error?.message).toContain('while its variables were listed');
    expect(hostile.error?.message).toContain('every variable was lost');
    expect(hostile.reset).toBe(true);
    expect(hostile.stdout).toBe('printed\n');

    const next = await sandbox.execute('print(typeof before, typeof x, context)');
    expect(next.error).toBeUndefined();
    expect(next.stdout).toBe('undefined undefined kept\n');
  }, 20_000);
});
