import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadSetupFiles } from '../../src/tools/setup-files.js';
import { packageRoot } from '../../src/paths.js';

// Setup files live outside the project on purpose: `rlm` and `zod` must still resolve.
const folder = mkdtempSync(join(tmpdir(), 'rlm-setup-files-'));
const file = (name: string, content: string) => {
  const path = join(folder, name);
  writeFileSync(path, content);
  return path;
};
const context = { callId: 'c', invocationId: 'i', signal: new AbortController().signal };

describe('setup files', () => {
  it('load TypeScript that imports defineTool from rlm and z from zod, wherever the file lives', async () => {
    const path = file(
      'tools.ts',
      `import { defineTool } from 'rlm';
import { z } from 'zod';
interface Stats { avg: number }
const cache: Record<string, Stats> = { q1: { avg: 4.2 } };
export const tools = [defineTool({ name: 'get_stats', parameters: z.object({ id: z.string() }), execute: ({ id }) => cache[id] })];
export const sandboxSetup = 'const FROM_SETUP = 1;';
`,
    );
    const { tools, sandboxSetup } = await loadSetupFiles([path]);
    expect(tools.map((tool) => tool.name)).toEqual(['get_stats']);
    expect(await tools[0]!.execute({ id: 'q1' } as never, context)).toEqual({ avg: 4.2 });
    expect(tools[0]!.validate({ id: 5 }).ok).toBe(false);
    expect(sandboxSetup).toEqual(['const FROM_SETUP = 1;']);
  });

  it('accept plain tool objects with JSON Schema and no imports, a default export, and sandboxSetup functions', async () => {
    const plain = file(
      'plain.js',
      `export default {
  tools: { shout: { name: 'shout', description: 'Upper-case', parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] }, execute: ({ text }) => text.toUpperCase() } },
  sandboxSetup() { const HELPER = (x) => x * 2; },
};`,
    );
    const { tools, sandboxSetup } = await loadSetupFiles([plain]);
    expect(tools[0]!.spec.function.parameters).toMatchObject({ required: ['text'] });
    expect(await tools[0]!.execute({ text: 'hi' } as never, context)).toBe('HI');
    expect(sandboxSetup[0]).toContain('const HELPER = (x) => x * 2;');
  });

  it('load the examples shipped in examples/', async () => {
    const examples = join(packageRoot(), 'examples');
    const { tools } = await loadSetupFiles([join(examples, 'stats-tools.ts'), join(examples, 'calculator.ts'), join(examples, 'plain-tool.js')]);
    expect(tools.map((tool) => tool.name)).toEqual(['get_stats', 'calculator', 'echo', 'word_count']);
  });

  it('name the file and line of a syntax error', async () => {
    const path = file('broken.ts', 'export const tools = [\n  { name: "x", execute: () => 1 ,, }\n];\n');
    await expect(loadSetupFiles([path])).rejects.toThrow(new RegExp(`Setup file ${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:2:\\d+: `));
  });

  it('name the file and line of an error thrown while loading', async () => {
    const path = file('throws.ts', 'const a = 1;\nconst b = 2;\nthrow new Error("cannot connect to the stats database");\nexport const tools = [];\n');
    await expect(loadSetupFiles([path])).rejects.toThrow(/Setup file .*throws.ts failed while loading: cannot connect to the stats database \(at .*throws.ts:3:\d+\)/);
  });

  it('explain missing files, missing exports and bad tools', async () => {
    await expect(loadSetupFiles([join(folder, 'absent.ts')])).rejects.toThrow(/Cannot read setup file .*absent.ts: no such file/);
    await expect(loadSetupFiles([file('empty.ts', 'export const other = 1;')])).rejects.toThrow(/exports neither "tools" nor "sandboxSetup"/);
    await expect(loadSetupFiles([file('badtool.ts', 'export const tools = [{ name: "bad name", execute() {} }];')])).rejects.toThrow(/tool #1: Invalid tool name "bad name"/);
  });

  it('points an error thrown while loading at the setup file and its line, wherever it lives', async () => {
    const path = file('throws-on-load.ts', 'const answer: number = 41;\n\nthrow new Error(`broken at load ${answer + 1}`);\nexport const tools = [];\n');
    await expect(loadSetupFiles([path])).rejects.toThrow(`Setup file ${path} failed while loading: broken at load 42 (at ${path}:3:7)`);
  });
});
