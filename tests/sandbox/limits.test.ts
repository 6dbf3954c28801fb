import { describe, expect, it } from 'vitest';
import { ConfigurationError } from '../../src/index.js';
import { createSandbox, inIsolation, ISOLATIONS, runBlocks } from './helpers.js';
import { rejectionOf } from '../rejection.js';

describe.each(ISOLATIONS)('%s isolation', (isolation) => {
  inIsolation(isolation);

  describe('block timeout', () => {
    const loops = {
      plain: 'while (true) {}',
      'after an awaited host call': 'await llm_query("x"); while (true) {}',
      'in a microtask': 'Promise.resolve().then(() => { while (true) {} }); print("queued")',
      'in an async function': 'async function spin() { await null; for (;;) {} } spin()',
    };
    for (const [label, code] of Object.entries(loops)) {
      it(`stops an infinite loop ${label} and keeps the sandbox usable`, async () => {
        const sandbox = await createSandbox({ blockTimeoutMs: 300, onHostCall: () => 'ok' });
        await sandbox.execute('const kept = "still here"');
        const result = await sandbox.execute(code);
        expect(result.error?.name).toBe('TimeoutError');
        expect(result.error?.message).toContain('more than 300 ms of execution time');
        expect(result.reset).toBe(false);
        expect((await sandbox.execute('print(kept)')).stdout).toBe('still here\n');
      });
    }

    it('does not let Atomics.wait park the sandbox', async () => {
      const sandbox = await createSandbox({ blockTimeoutMs: 300 });
      const started = Date.now();
      const result = await sandbox.execute('Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0)');
      expect(result.error?.name).toBe('TypeError');
      expect(Date.now() - started).toBeLessThan(2_000);
    });

    it('kills and replaces a worker that stops responding', async () => {
      let stopWorker: () => void = () => {};
      const sandbox = await createSandbox({
        blockTimeoutMs: 200,
        onHostCall: () => {
          stopWorker();
          return 'ok';
        },
      });
      await sandbox.setContext('survives');
      stopWorker = () => process.kill(sandbox.processId!, 'SIGSTOP');
      const result = await sandbox.execute('llm_query("freeze the worker now")');
      expect(result.error?.name).toBe('TimeoutError');
      expect(result.error?.message).toContain('could not be interrupted');
      expect(result.reset).toBe(true);
      stopWorker = () => {};
      expect((await sandbox.execute('print(context)')).stdout).toBe('survives\n');
    });
  });

  describe('memory limit', () => {
    it('contains an allocation bomb that takes down the V8 process, and the run goes on', async () => {
      const sandbox = await createSandbox({ memoryLimitMb: 128, blockTimeoutMs: 10_000 });
      const bystander = await createSandbox({ memoryLimitMb: 128 });
      await bystander.execute('const mine = "untouched"');
      await sandbox.setContext('context survives the reset');
      await sandbox.execute('const lost = 1');

      const result = await sandbox.execute('new Array(1e8).fill(0)');
      expect(['SandboxCrashedError', 'MemoryLimitError']).toContain(result.error?.name);
      expect(result.error?.message).toContain('every variable was lost');
      expect(result.reset).toBe(true);
      expect(result.variables).toEqual([]);

      const after = await sandbox.execute('print(typeof lost, context)');
      expect(after.stdout).toBe('undefined context survives the reset\n');
      const bystanderAfter = await bystander.execute('print(mine)');
      if (isolation === 'process') {
        expect(bystanderAfter.stdout).toBe('untouched\n');
      } else {
        // It shared the crashed process: its variables went with it, and its next block says why.
        expect(bystanderAfter.error).toMatchObject({ name: 'SandboxCrashedError', message: expect.stringMatching(/stopped between blocks \(.+\), so this block did not run/) });
        expect((await bystander.execute('print(typeof mine)')).stdout).toBe('undefined\n');
      }
    });

    it('stops gradual allocation at the memory limit', async () => {
      const sandbox = await createSandbox({ memoryLimitMb: 64, blockTimeoutMs: 20_000 });
      const result = await sandbox.execute('const parts = []; while (true) parts.push(new Array(1e5).fill(1.5))');
      expect(result.error?.name).toBe('MemoryLimitError');
      expect(result.error?.message).toContain('(64 MB)');
      expect(result.reset).toBe(true);
      expect((await sandbox.execute('print("fresh")')).stdout).toBe('fresh\n');
    });
  });

  describe('other runaway code', () => {
    it('turns deep recursion into a catchable RangeError', async () => {
      const sandbox = await createSandbox();
      const result = await sandbox.execute('function down(n) { return down(n + 1) + 1 } down(0)');
      expect(result.error?.name).toBe('RangeError');
      expect(result.error?.message).toContain('Maximum call stack size exceeded');
      expect((await sandbox.execute('print("fine")')).stdout).toBe('fine\n');
    });

    it('bounds huge output without holding it', async () => {
      const sandbox = await createSandbox({ blockTimeoutMs: 10_000 });
      const result = await sandbox.execute('const chunk = "z".repeat(1e6); for (let i = 0; i < 500; i++) print(chunk)');
      expect(result.error).toBeUndefined();
      expect(result.stdout.length).toBeLessThan(21_000);
      expect(result.stdout).toContain('output truncated: 499,980,500 more characters');
    });

    it('reports a promise that can never settle instead of hanging', async () => {
      const sandbox = await createSandbox();
      const result = await sandbox.execute('await new Promise(() => {}); print("never")');
      expect(result.error?.name).toBe('PendingPromiseError');
      expect(result.stdout).toBe('');
    });

    it("reports a block as pending when an earlier block's promise settles during it", async () => {
      const sandbox = await createSandbox();
      const first = await sandbox.execute('await new Promise((resolve) => { globalThis.release = resolve; }); print("first resumed")');
      expect(first.error?.name).toBe('PendingPromiseError');
      // Resuming the first block ends it, not this one: this block still awaits what nothing settles.
      const second = await sandbox.execute('release(); await new Promise(() => {})');
      expect(second.error?.name).toBe('PendingPromiseError');
      expect(second.stdout).toBe('first resumed\n');
    });

    it('stops a block when the caller aborts, even while it waits for the host', async () => {
      const controller = new AbortController();
      const deadline = new Error('deadline reached');
      const sandbox = await createSandbox({
        // The caller gives up while the block waits for this host call.
        onHostCall: (_call, { signal }) =>
          new Promise((resolve, reject) => {
            signal.addEventListener('abort', () => reject(signal.reason));
            controller.abort(deadline);
          }),
      });
      await sandbox.setContext('still loaded');
      expect(await rejectionOf(sandbox.execute('llm_query("slow")', { signal: controller.signal }), Error)).toBe(deadline);
      expect((await sandbox.execute('print(context)')).stdout).toBe('still loaded\n');
    });

    it('rejects at once when the signal is already aborted', async () => {
      const sandbox = await createSandbox();
      const tooLate = new Error('too late');
      expect(await rejectionOf(sandbox.execute('1', { signal: AbortSignal.abort(tooLate) }), Error)).toBe(tooLate);
    });

    it('refuses work after dispose', async () => {
      const sandbox = await createSandbox();
      await sandbox.dispose();
      await expect(sandbox.execute('1')).rejects.toMatchObject({ code: 'sandbox_disposed' });
    });

    it('validates its options with messages that show what was given', async () => {
      expect(await rejectionOf(createSandbox({ memoryLimitMb: 4 }), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/memoryLimitMb: .*16.*got 4/) });
      expect(await rejectionOf(createSandbox({ blockTimeoutMs: 'soon' as unknown as number }), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/blockTimeoutMs: .*got "soon"/) });
    });

    it('runs several blocks back to back after errors', async () => {
      const sandbox = await createSandbox({ blockTimeoutMs: 300 });
      const result = await runBlocks(sandbox, 'let n = 0', 'n++', 'n++');
      expect(result.stdout).toBe('1\n');
    });
  });
});
