import { monitorEventLoopDelay } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { SandboxError, type HostCall } from '../../src/index.js';
import { createSandbox } from './helpers.js';

/** Measures the host's event-loop delay while `work` runs: the host must stay responsive. */
async function withLoopDelay<T>(work: () => Promise<T>): Promise<{ result: T; maxDelayMs: number }> {
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  histogram.enable();
  try {
    const result = await work();
    return { result, maxDelayMs: histogram.max / 1e6 };
  } finally {
    histogram.disable();
  }
}

describe('one host call carries bounded work', () => {
  it('refuses a batch of a million prompts inside the sandbox; the host never sees it', async () => {
    const calls: HostCall[] = [];
    const sandbox = await createSandbox({
      onHostCall: (call) => (calls.push(call), call.kind === 'llm_query_batched' ? call.prompts.map(() => 'ok') : 'ok'),
      blockTimeoutMs: 10_000,
    });
    const bystander = await createSandbox({ onHostCall: () => 'still here' });
    const { result, maxDelayMs } = await withLoopDelay(async () => {
      const [big, small] = await Promise.all([
        sandbox.execute('const prompts = new Array(1_000_000).fill("p"); try { llm_query_batched(prompts) } catch (error) { print(error.name, error.message) }'),
        bystander.execute('print(llm_query("ping"))'),
      ]);
      return { big, small };
    });
    expect(result.big.stdout).toMatch(/^RangeError llm_query_batched: at most 10000 prompts fit in one call, got 1000000\. Split the batch/);
    expect(result.small.stdout).toBe('still here\n');
    expect(calls).toHaveLength(0);
    expect(maxDelayMs).toBeLessThan(500);
    // The limit is a fact of one call, not of the sandbox: a batch under it still goes through.
    const fits = await sandbox.execute('llm_query_batched(prompts.slice(0, 10_000)).length');
    expect(fits.stdout).toBe('10000\n');
    expect(calls).toHaveLength(1);
  });

  it('refuses deeply nested arguments before they reach the host', async () => {
    const calls: HostCall[] = [];
    const sandbox = await createSandbox({ onHostCall: (call) => calls.push(call) && 'ok' });
    const result = await sandbox.execute(`
      let nested = 'leaf';
      for (let i = 0; i < 100_000; i++) nested = [nested];
      for (const attempt of [() => llm_query([{ role: 'user', content: nested }]), () => tool_handler('t', { nested })]) {
        try { attempt() } catch (error) { print(error.name, error.message) }
      }
    `);
    expect(result.stdout).toMatch(/^RangeError llm_query: the value is nested more than 64 levels deep\. Split the data/);
    expect(result.stdout.split('\n')[1]).toMatch(/^RangeError tool_handler: .*nested more than 64 levels/);
    expect(calls).toHaveLength(0);
  });
});

describe('memory outside the heap limit', () => {
  it('has no WebAssembly', async () => {
    const sandbox = await createSandbox();
    const result = await sandbox.execute('typeof WebAssembly');
    expect(result.stdout).toBe('"undefined"\n');
  });

  it('resets a worker whose resident memory grows far past its limit', async () => {
    const sandbox = await createSandbox({ memoryLimitMb: 1024, rssLimitMb: 200, blockTimeoutMs: 10_000 });
    await sandbox.execute('var before = 1');
    const started = Date.now();
    const result = await sandbox.execute('const big = new Float64Array(40_000_000).fill(1.5); while (true) {}');
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(result.reset).toBe(true);
    expect(result.error?.name).toBe('MemoryLimitError');
    expect(result.error?.message).toContain('grew far past its memory limit');
    const after = await sandbox.execute('typeof before');
    expect(after.stdout).toBe('"undefined"\n');
  });
});

describe('the block report is bounded', () => {
  it('cuts error messages, stacks and the variable list, whatever the block did', async () => {
    const sandbox = await createSandbox({ outputLimitChars: 1_000 });
    const result = await sandbox.execute(`
      for (let i = 0; i < 5_000; i++) globalThis['a_long_variable_name_' + 'x'.repeat(500) + i] = i;
      throw new Error('m'.repeat(1_000_000));
    `);
    expect(result.error?.message.length).toBeLessThan(2_100);
    expect(result.error?.message).toContain('more chars');
    expect(result.variables).toHaveLength(100);
    expect(result.omittedVariables).toBe(4_900);
    expect(Math.max(...result.variables.map((variable) => variable.name.length))).toBeLessThan(110);
    expect(JSON.stringify(result).length).toBeLessThan(20_000);

    const recursion = await sandbox.execute('function down(n) { return down(n + 1) + 1 } down(0)');
    expect(recursion.error?.name).toBe('RangeError');
    expect(recursion.error!.stack.split('\n').length).toBeLessThanOrEqual(21);

    const missing = await sandbox.execute('FINAL_VAR("nope")');
    expect(missing.stdout).toMatch(/^FINAL_VAR error: no variable named "nope"\. Defined variables: a_long_variable_name_x+\.\.\. \(\d+ more chars\), /);
    expect(missing.stdout.length).toBeLessThan(1_200);
  });

  it('cuts what a rejected promise or a compile error carries', async () => {
    const sandbox = await createSandbox();
    const rejected = await sandbox.execute('Promise.reject(new Error("r".repeat(1_000_000))); 1');
    expect(rejected.error?.message.length).toBeLessThan(2_100);
  });
});

describe('loading values into the isolate is time-limited', () => {
  it('fails a context load that outlasts the block timeout and leaves a usable sandbox', async () => {
    const sandbox = await createSandbox({ blockTimeoutMs: 20, memoryLimitMb: 512 });
    await sandbox.execute('var earlier = 1');
    const rows = Array.from({ length: 400_000 }, (_, id) => ({ id, tags: ['a', 'b'] }));
    const started = Date.now();
    const error = await sandbox.setContext(rows, 'context_1').catch((caught: unknown) => caught);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(error).toBeInstanceOf(SandboxError);
    expect((error as SandboxError).code).toBe('sandbox_load_failed');
    expect((error as Error).message).toMatch(/Loading context_1 into the sandbox failed: it did not finish within the 20 ms block time limit/);
    const after = await sandbox.execute('typeof context_1');
    expect(after.error).toBeUndefined();
    expect(after.stdout).toBe('"undefined"\n');
  });

  it('stops a context load when its signal aborts', async () => {
    const sandbox = await createSandbox({ blockTimeoutMs: 30_000, memoryLimitMb: 1024 });
    const controller = new AbortController();
    const rows = Array.from({ length: 2_000_000 }, (_, id) => ({ id }));
    setTimeout(() => controller.abort(new Error('run over')), 50);
    const started = Date.now();
    await expect(sandbox.setContext(rows, 'context', { signal: controller.signal })).rejects.toThrow('run over');
    expect(Date.now() - started).toBeLessThan(5_000);
    expect((await sandbox.execute('1 + 1')).stdout).toBe('2\n');
  });
});

describe('session names', () => {
  it('cannot be taken in advance by model code', async () => {
    const sandbox = await createSandbox();
    await sandbox.setContext('first', 'context_0');
    const squat = await sandbox.execute('var context_1 = "squatted"; var history_0 = "squatted"; function context_2() {}');
    expect(squat.error).toBeUndefined();
    await sandbox.setContext('second', 'context_1');
    await sandbox.setContext(['earlier'], 'history_0');
    const result = await sandbox.execute('print(context_1, history_0[0])');
    expect(result.stdout).toBe('second earlier\n');
  });

  it('fail clearly when a name past the reserved range was taken', async () => {
    const sandbox = await createSandbox();
    await sandbox.setContext('first', 'context_0');
    await sandbox.execute('var context_5000 = "squatted"');
    await expect(sandbox.setContext('late', 'context_5000')).rejects.toThrow(
      /context_5000 cannot be loaded: model code already defined a variable with that name/,
    );
  });
});

describe('a memory reset is blamed on the block that caused it', () => {
  it('resets after the block that left the heap nearly full, not during the next one', async () => {
    const sandbox = await createSandbox({ memoryLimitMb: 64, blockTimeoutMs: 5_000 });
    const filling = await sandbox.execute('var keep = []; for (let i = 0; i < 60; i++) keep.push(new Array(131072).fill(i)); print(keep.length)');
    expect(filling.stdout).toBe('60\n');
    expect(filling.reset).toBe(true);
    expect(filling.error?.name).toBe('MemoryLimitError');
    expect(filling.error?.message).toMatch(/^The block left the sandbox's memory nearly full \(\d+ of \d+ MB still in use after it ended\)/);
    const next = await sandbox.execute('const more = new Array(6 * 131072).fill(1); print(more.length)');
    expect(next.error).toBeUndefined();
    expect(next.stdout).toBe('786432\n');
  });

  it('never blames an innocent block after an allocating loop timed out', async () => {
    for (let attempt = 0; attempt < 3; attempt++) {
      const sandbox = await createSandbox({ memoryLimitMb: 64, blockTimeoutMs: 1_000 });
      const loop = await sandbox.execute('var keep = []; while (true) keep.push("x".repeat(100) + Math.random())');
      expect(loop.error?.name).toMatch(/TimeoutError|MemoryLimitError/);
      const innocent = await sandbox.execute('print(1 + 1)');
      expect(innocent.error).toBeUndefined();
      expect(innocent.stdout).toBe('2\n');
      await sandbox.dispose();
    }
  });
});
