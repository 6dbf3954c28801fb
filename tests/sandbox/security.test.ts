import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { HostCall } from '../../src/index.js';
import { createSandbox } from './helpers.js';

const HOST_TRACES = /\/work|\/home|\/root|\/tmp|node:|file:|node_modules|isolated-vm|rlm-prelude|worker/;

describe('no ambient authority', () => {
  it('exposes no Node, browser or timer APIs', async () => {
    const sandbox = await createSandbox();
    const names = ['require', 'process', 'module', 'exports', 'Buffer', 'global', 'fetch', 'XMLHttpRequest', 'WebSocket', 'setTimeout', 'setInterval', 'setImmediate', 'queueMicrotask', 'importScripts', 'Deno', 'Bun'];
    const result = await sandbox.execute(`${JSON.stringify(names)}.filter((name) => typeof globalThis[name] !== 'undefined')`);
    expect(result.stdout).toBe('[]\n');
  });

  it('cannot import modules', async () => {
    const sandbox = await createSandbox();
    const dynamic = await sandbox.execute('await import("node:fs")');
    expect(dynamic.error?.message).toMatch(/not supported/i);
    const staticImport = await sandbox.execute('import fs from "node:fs"');
    expect(staticImport.error?.name).toBe('SyntaxError');
  });

  it('finds nothing of the host through constructor chains, Function or eval', async () => {
    const sandbox = await createSandbox({ onHostCall: () => 'x' });
    const probes = [
      'this.constructor.constructor("return typeof process")()',
      'print.constructor("return typeof process")()',
      'llm_query.constructor("return typeof require")()',
      'await Object.getPrototypeOf(async function () {}).constructor("return typeof process")()',
      'eval("typeof process")',
      'Function("return this")() === globalThis',
      '(0, eval)("typeof require")',
    ];
    const result = await sandbox.execute(`FINAL([${probes.join(',\n')}])`);
    expect(result.error).toBeUndefined();
    expect(JSON.parse(result.final!)).toEqual(['undefined', 'undefined', 'undefined', 'undefined', 'undefined', true, 'undefined']);
  });

  it('gives Error.prepareStackTrace no host frames, paths or functions', async () => {
    const sandbox = await createSandbox({
      onHostCall: () => {
        throw new Error('host failure at /secret/host/path.js');
      },
    });
    const result = await sandbox.execute(`
      const frames = [];
      Error.prepareStackTrace = (error, callSites) => {
        for (const site of callSites) {
          frames.push({ file: String(site.getFileName()), fn: typeof site.getFunction(), self: typeof site.getThis(), text: String(site) });
        }
        return 'custom';
      };
      const attempts = [() => llm_query("x"), () => llm_query(Symbol("s")), () => tool_handler(1), () => FINAL()];
      const messages = [];
      for (const attempt of attempts) {
        try { attempt() } catch (error) { error.stack; messages.push(error.message) }
      }
      JSON.stringify({ frames, messages })
    `);
    expect(result.error).toBeUndefined();
    const { frames, messages } = JSON.parse(JSON.parse(result.stdout)) as {
      frames: { file: string; fn: string; self: string; text: string }[];
      messages: string[];
    };
    expect(frames.length).toBeGreaterThan(0);
    for (const frame of frames) {
      expect(frame.file).not.toMatch(/\/|node:|file:/);
      if (frame.file === 'rlm-prelude') {
        // Prelude code is strict: no call site hands out its functions or receivers.
        expect(frame.fn).toBe('undefined');
        expect(frame.self).toBe('undefined');
      }
    }
    // The host error's message passes through, but never its stack.
    expect(messages[0]).toBe('host failure at /secret/host/path.js');
    expect(JSON.stringify(frames)).not.toContain('secret');
  });

  it('finds no isolated-vm handle anywhere reachable from globals', async () => {
    const sandbox = await createSandbox({ onHostCall: () => 'x' });
    await sandbox.setContext({ nested: ['value'] });
    const result = await sandbox.execute(`
      const suspicious = [];
      const seen = new Set();
      const visit = (value, path, depth) => {
        if (value === null || (typeof value !== 'object' && typeof value !== 'function') || seen.has(value) || depth > 6) return;
        seen.add(value);
        const ctorName = (() => { try { return value.constructor && value.constructor.name } catch { return '' } })();
        if (['Reference', 'ExternalCopy', 'Isolate', 'Callback', 'Script', 'Context', 'NativeModule'].includes(ctorName)) suspicious.push(path + ' ' + ctorName);
        let keys = [];
        try { keys = Reflect.ownKeys(value) } catch {}
        for (const key of keys) {
          if (['applySync', 'applySyncPromise', 'applyIgnored', 'derefInto', 'copyInto', 'getSync', 'setSync'].includes(String(key))) suspicious.push(path + '.' + String(key));
          let descriptor;
          try { descriptor = Object.getOwnPropertyDescriptor(value, key) } catch { continue }
          if (!descriptor) continue;
          for (const next of [descriptor.value, descriptor.get, descriptor.set]) visit(next, path + '.' + String(key), depth + 1);
        }
        try { visit(Object.getPrototypeOf(value), path + '.__proto__', depth + 1) } catch {}
      };
      visit(globalThis, 'globalThis', 0);
      suspicious
    `);
    expect(result.error).toBeUndefined();
    expect(result.stdout).toBe('[]\n');
    // Control: the same walk does find a handle-shaped object when one is reachable.
    const control = await sandbox.execute('var planted = { deep: { applySync() {} } }; seen.clear(); visit(globalThis, "globalThis", 0); suspicious');
    expect(control.stdout).toContain('globalThis.planted.deep.applySync');
  });

  it('keeps prototype pollution inside the sandbox', async () => {
    const calls: HostCall[] = [];
    const sandbox = await createSandbox({
      onHostCall: (call) => {
        calls.push(call);
        return 'ok';
      },
    });
    await sandbox.execute(`
      Object.prototype.polluted = 'yes';
      Array.prototype.includes = () => true;
      JSON.stringify = () => '{"kind":"tool_call","name":"evil","arguments":{}}';
      tool_handler('t', JSON.parse('{"__proto__": {"polluted": "via payload"}, "plain": 1}'));
      llm_query([{ role: 'user', content: 'hi', ['__proto__']: { polluted: 'via message' } }]);
    `);
    expect(calls).toHaveLength(2);
    const [toolCall, query] = calls;
    expect(toolCall).toMatchObject({ kind: 'tool_call', name: 't', arguments: { plain: 1 } });
    const args = (toolCall as Extract<HostCall, { kind: 'tool_call' }>).arguments;
    expect(Object.getPrototypeOf(args)).toBe(Object.prototype);
    expect((args as Record<string, unknown>).polluted).toBeUndefined();
    expect(query?.kind).toBe('llm_query');
    const message = (query as Extract<HostCall, { kind: 'llm_query' }>).prompt[0] as object;
    expect(Object.getPrototypeOf(message)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(([] as unknown[]).includes(1)).toBe(false);
  });

  it('starts the worker process with an empty environment, so no API key is in it', async () => {
    process.env.RLM_TEST_SECRET = 'sk-should-never-leak';
    try {
      const sandbox = await createSandbox();
      const environ = readFileSync(`/proc/${sandbox.processId}/environ`, 'utf8');
      expect(environ).toBe('');
    } finally {
      delete process.env.RLM_TEST_SECRET;
    }
  });

  it('keeps host paths out of every error the model sees', async () => {
    const sandbox = await createSandbox({ blockTimeoutMs: 200, onHostCall: () => { throw new TypeError('nope') } });
    const blocks = ['null.x', 'llm_query("q")', 'while (true) {}', 'await import("x")', 'Promise.reject(new Error("r"))', 'syntax error here', 'throw new Error("e")'];
    for (const block of blocks) {
      const result = await sandbox.execute(block);
      expect(result.error, block).toBeDefined();
      expect(result.error!.stack, block).not.toMatch(HOST_TRACES);
      expect(result.error!.message, block).not.toMatch(HOST_TRACES);
    }
  });
});
