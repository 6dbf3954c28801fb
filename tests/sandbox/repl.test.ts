import { describe, expect, it } from 'vitest';
import { createSandbox, inIsolation, ISOLATIONS, runBlocks } from './helpers.js';

describe.each(ISOLATIONS)('%s isolation', (isolation) => {
  inIsolation(isolation);

  describe('REPL semantics', () => {
    it('keeps state across blocks', async () => {
      const sandbox = await createSandbox();
      const result = await runBlocks(sandbox, 'const items = [1, 2, 3]; var total = 10', 'print(items.length + total)');
      expect(result.stdout).toBe('13\n');
    });

    it('lets later blocks declare const, let, function and class names again', async () => {
      const sandbox = await createSandbox();
      const result = await runBlocks(
        sandbox,
        'const x = 1; let y = 2; function f() { return "f1" } class K { v() { return "k1" } }',
        'const x = 10; let y = 20; function f() { return "f2" } class K { v() { return "k2" } }',
        'print(x, y, f(), new K().v())',
      );
      expect(result.stdout).toBe('10 20 f2 k2\n');
    });

    it('supports top-level await and keeps its declarations', async () => {
      const sandbox = await createSandbox();
      const result = await runBlocks(
        sandbox,
        'const v = await Promise.resolve(41); async function inc(n) { return n + 1 }',
        'const w = await inc(v); print(w)',
      );
      expect(result.stdout).toBe('42\n');
    });

    it('captures print and every console method in order', async () => {
      const sandbox = await createSandbox();
      const result = await sandbox.execute(
        'print("a"); console.log("b"); console.info("c"); console.warn("d"); console.error("e"); print("f", 1, true)',
      );
      expect(result.stdout).toBe('a\nb\nc\nd\ne\nf 1 true\n');
    });

    it('prints objects readably', async () => {
      const sandbox = await createSandbox();
      const result = await sandbox.execute(
        'print({ name: "x", list: [1, "two", null], nested: { deep: { deeper: { deepest: { end: 1 } } } } }); print(new Map([["k", 1]]), new Set([1]))',
      );
      expect(result.stdout).not.toContain('[object Object]');
      expect(result.stdout).toContain("name: \"x\"");
      expect(result.stdout).toContain('list: [ 1, "two", null ]');
      expect(result.stdout).toContain('[Object]'); // depth limit
      expect(result.stdout).toContain('Map(1) { "k" => 1 } Set(1) { 1 }');
    });

    it('prints cyclic structures without hanging', async () => {
      const sandbox = await createSandbox();
      const result = await sandbox.execute('const a = { name: "a" }; a.self = a; print(a)');
      expect(result.stdout).toBe('{ name: "a", self: [Circular] }\n');
    });

    it('shows a trailing expression like a notebook cell, and nothing for undefined', async () => {
      const sandbox = await createSandbox();
      expect((await sandbox.execute('const n = 2\nn * 21')).stdout).toBe('42\n');
      expect((await sandbox.execute('"text"')).stdout).toBe('"text"\n');
      expect((await sandbox.execute('print("only this")')).stdout).toBe('only this\n');
      expect((await sandbox.execute('void 0')).stdout).toBe('');
      expect((await sandbox.execute('await Promise.resolve({ ok: true })')).stdout).toBe('{ ok: true }\n');
    });

    it('cuts output over the limit and says how much was dropped', async () => {
      const sandbox = await createSandbox({ outputLimitChars: 1_000 });
      const result = await sandbox.execute('print("x".repeat(5000))');
      expect(result.stdout.startsWith('x'.repeat(1_000))).toBe(true);
      expect(result.stdout).not.toContain('x'.repeat(1_001));
      expect(result.stdout).toContain('output truncated: 4,001 more characters');
    });

    it('uses a default output limit of 20,000 characters', async () => {
      const sandbox = await createSandbox();
      const result = await sandbox.execute('for (let i = 0; i < 100; i++) print("y".repeat(999))');
      expect(result.stdout).toContain('output truncated: 80,000 more characters');
    });

    it('reports errors with name, message and a stack at the lines of the block', async () => {
      const sandbox = await createSandbox();
      const result = await sandbox.execute('const a = 1;\nfunction fail() {\n  throw new RangeError("too far");\n}\nfail();');
      expect(result.error?.name).toBe('RangeError');
      expect(result.error?.message).toBe('too far');
      expect(result.error?.stack).toContain('at fail (block:3:9)');
      expect(result.error?.stack).toContain('at block:5:1');
      expect(result.error?.stack).not.toMatch(/\/work|node:|file:|isolated-vm|rlm-prelude|block:6/);
    });

    it('reports columns on the first line as the model wrote them', async () => {
      const sandbox = await createSandbox();
      const result = await sandbox.execute('const q = 1; null.boom');
      expect(result.error?.stack).toContain('at block:1:19');
    });

    it('reports syntax errors with a code frame', async () => {
      const sandbox = await createSandbox();
      const result = await sandbox.execute('const fine = 1;\nconst broken = ;');
      expect(result.error?.name).toBe('SyntaxError');
      expect(result.error?.message).toContain('(2:15)');
      expect(result.error?.stack).toContain('2 | const broken = ;');
    });

    it('reports thrown non-errors readably', async () => {
      const sandbox = await createSandbox();
      const result = await sandbox.execute('throw { code: 7 }');
      expect(result.error?.message).toBe('{ code: 7 }');
    });

    it('keeps the bindings a block made before it threw', async () => {
      const sandbox = await createSandbox();
      await sandbox.execute('const before = "kept"; let counter = 1; counter++; undefinedFunction(); const after = 1');
      const result = await sandbox.execute('print(before, counter, typeof after)');
      expect(result.stdout).toBe('kept 2 undefined\n');
    });

    it('reports unhandled rejections of other promises', async () => {
      const sandbox = await createSandbox();
      const result = await sandbox.execute('Promise.reject(new Error("lost")); print("done")');
      expect(result.stdout).toBe('done\n');
      expect(result.error?.message).toContain('lost');
      expect(result.error?.message).toContain('nothing handled it');
    });

    it('keeps scaffold globals working after model code overwrites them', async () => {
      const sandbox = await createSandbox({ onHostCall: () => 'model answer' });
      await sandbox.setContext('the context');
      const names = ['context', 'llm_query', 'llm_query_batched', 'rlm_query', 'rlm_query_batched', 'tool_handler', 'FINAL', 'FINAL_VAR', 'SHOW_VARS', 'print', 'console'];
      const assign = names.map((name) => `${name} = "broken";`).join('\n');
      const overwritten = await sandbox.execute(`${assign}\nprint === "broken"`);
      // Inside the block that assigned it, the new value is visible.
      expect(overwritten.error).toBeUndefined();

      await sandbox.execute('const context = 1; let print = 2; function llm_query() { return "fake" } class FINAL {}');
      await sandbox.execute('try { Object.defineProperty(globalThis, "print", { value: 3 }) } catch {} try { delete globalThis.print } catch {}');
      const result = await sandbox.execute(
        'print(context, llm_query("q"), typeof llm_query_batched, typeof rlm_query, typeof rlm_query_batched, typeof tool_handler, typeof FINAL, typeof FINAL_VAR, typeof SHOW_VARS); console.log("console ok")',
      );
      expect(result.error).toBeUndefined();
      expect(result.stdout).toBe('the context model answer function function function function function function function\nconsole ok\n');
    });

    it('lists the model variables with their types', async () => {
      const sandbox = await createSandbox();
      const result = await runBlocks(sandbox, 'const name = "abc"; const list = [1, 2]; const map = new Map(); function helper() {}', 'SHOW_VARS()');
      expect(result.stdout).toContain('name: string (3 chars)');
      expect(result.stdout).toContain('list: array[2]');
      expect(result.stdout).toContain('map: Map(0)');
      expect(result.stdout).toContain('helper: function');
      expect(result.stdout).not.toMatch(/llm_query|print|context|__rlm/);
      expect(result.variables).toEqual([
        { name: 'helper', type: 'function' },
        { name: 'list', type: 'array[2]' },
        { name: 'map', type: 'Map(0)' },
        { name: 'name', type: 'string (3 chars)' },
      ]);
    });

    it('says so when there are no variables', async () => {
      const sandbox = await createSandbox();
      expect((await sandbox.execute('SHOW_VARS()')).stdout).toBe('No variables defined yet.\n');
    });
  });

  describe('final answers', () => {
    it('FINAL marks the answer and the rest of the block still runs', async () => {
      const sandbox = await createSandbox();
      const result = await sandbox.execute('FINAL("the answer"); print("after")');
      expect(result.final).toBe('the answer');
      expect(result.stdout).toBe('after\n');
    });

    it('serializes non-string answers: JSON for objects and arrays', async () => {
      const sandbox = await createSandbox();
      expect((await sandbox.execute('FINAL(42)')).final).toBe('42');
      expect((await sandbox.execute('FINAL({ a: [1, "b"] })')).final).toBe('{"a":[1,"b"]}');
      expect((await sandbox.execute('FINAL([1, 2])')).final).toBe('[1,2]');
      expect((await sandbox.execute('FINAL(null)')).final).toBe('null');
    });

    it('FINAL_VAR looks up a variable by name', async () => {
      const sandbox = await createSandbox();
      const result = await runBlocks(sandbox, 'const summary = { count: 3 }', 'FINAL_VAR("summary")');
      expect(result.final).toBe('{"count":3}');
    });

    it('FINAL_VAR uses a non-string value as it is', async () => {
      const sandbox = await createSandbox();
      expect((await sandbox.execute('const n = 7; FINAL_VAR(n)')).final).toBe('7');
    });

    it('FINAL_VAR with an unknown name tells the model and ends nothing', async () => {
      const sandbox = await createSandbox();
      const result = await runBlocks(sandbox, 'const known = 1', 'FINAL_VAR("missing")');
      expect(result.final).toBeUndefined();
      expect(result.stdout).toContain('no variable named "missing"');
      expect(result.stdout).toContain('Defined variables: known');
    });

    it('a block without FINAL has no final answer', async () => {
      const sandbox = await createSandbox();
      expect((await sandbox.execute('print(1)')).final).toBeUndefined();
    });
  });
});
