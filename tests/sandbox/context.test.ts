import { describe, expect, it } from 'vitest';
import { ConfigurationError } from '../../src/index.js';
import { createSandbox, inIsolation, ISOLATIONS, runBlocks } from './helpers.js';
import { thrownBy } from '../rejection.js';

describe.each(ISOLATIONS)('%s isolation', (isolation) => {
  inIsolation(isolation);

  describe('context loading', () => {
    it('loads a string as a string', async () => {
      const sandbox = await createSandbox();
      await sandbox.setContext('line one\nline two');
      const result = await sandbox.execute('typeof context + " " + context.split("\\n").length');
      expect(result.stdout).toBe('"string 2"\n');
    });

    it('keeps non-ASCII text intact', async () => {
      const sandbox = await createSandbox();
      const text = 'naïve café — 日本語 🎉';
      await sandbox.setContext(text);
      const result = await sandbox.execute('FINAL(context)');
      expect(result.final).toBe(text);
    });

    it('loads arrays and JSON objects as values', async () => {
      const sandbox = await createSandbox();
      await sandbox.setContext(['a', 'bb', { c: 1 }]);
      expect((await sandbox.execute('Array.isArray(context) + " " + context[2].c')).stdout).toBe('"true 1"\n');
      await sandbox.setContext({ docs: [{ title: 't', body: 'b' }], total: 1 });
      expect((await sandbox.execute('context.docs[0].title + context.total')).stdout).toBe('"t1"\n');
    });

    it('loads further contexts under their own names', async () => {
      const sandbox = await createSandbox();
      await sandbox.setContext('first');
      await sandbox.setContext('second', 'context_1');
      expect((await sandbox.execute('context + " " + context_1')).stdout).toBe('"first second"\n');
      expect(thrownBy(() => sandbox.setContext('x', 'not valid'), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/JavaScript identifier/) });
    });

    it('rejects values that cannot be a context', async () => {
      const sandbox = await createSandbox();
      expect(thrownBy(() => sandbox.setContext(undefined), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/must be a string or JSON-serializable/) });
      expect(thrownBy(() => sandbox.setContext(() => 1), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/must be a string or JSON-serializable/) });
    });

    it('loads a 100 MB string', async () => {
      const sandbox = await createSandbox({ memoryLimitMb: 512 });
      const line = 'The quick brown fox jumps over the lazy dog 0123456789\n';
      const text = line.repeat(Math.ceil(100_000_000 / line.length));
      await sandbox.setContext(text);
      const result = await sandbox.execute('[context.length, context.indexOf("dog"), context.slice(-11)]');
      expect(result.error).toBeUndefined();
      expect(result.stdout).toBe(`[ ${text.length}, ${line.indexOf('dog')}, "0123456789\\n" ]\n`);
    });

    it('keeps array and object contexts read-only, so every block sees the same input', async () => {
      const sandbox = await createSandbox();
      await sandbox.setContext([{ n: 1 }, { n: 2 }]);
      const mutation = await sandbox.execute('context.push({ n: 3 })');
      expect(mutation.error?.name).toBe('TypeError');
      const nested = await sandbox.execute('"use strict"; try { context[0].n = 99 } catch (e) { print(e.name) }');
      expect(nested.stdout).toBe('TypeError\n');
      expect((await sandbox.execute('JSON.stringify(context)')).stdout).toBe('"[{\\"n\\":1},{\\"n\\":2}]"\n');
    });

    it('loads deeply nested JSON', async () => {
      const sandbox = await createSandbox();
      let nested: unknown = 'leaf';
      for (let depth = 0; depth < 4_000; depth++) nested = [nested];
      await sandbox.setContext({ nested });
      const result = await sandbox.execute('let node = context.nested, depth = 0; while (Array.isArray(node)) { node = node[0]; depth++ } [depth, node]');
      expect(result.stdout).toBe("[ 4000, \"leaf\" ]\n");
    });

    it('keeps model changes to context local to the block that made them', async () => {
      const sandbox = await createSandbox();
      await sandbox.setContext('original');
      const result = await runBlocks(sandbox, 'context = "changed"; print(context)', 'print(context)');
      expect(result.stdout).toBe('original\n');
    });
  });

  describe('context transfer files', () => {
    it('removes the temporary file once the worker has loaded the context', async () => {
      const { readdirSync, existsSync } = await import('node:fs');
      const sandbox = await createSandbox();
      await sandbox.setContext('x'.repeat(10_000));
      const folders = ['/dev/shm', (await import('node:os')).tmpdir()].filter(existsSync);
      const leftovers = folders.flatMap((folder) =>
        readdirSync(folder)
          .filter((name) => name.startsWith('rlm-'))
          .flatMap((name) => readdirSync(`${folder}/${name}`).filter((file) => file.startsWith(`context-${process.pid}-`))),
      );
      expect(leftovers).toEqual([]);
    });
  });
});
