import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigurationError, RLM } from '../../src/index.js';
import { loadSetupFiles } from '../../src/tools/setup-files.js';
import { packageRoot } from '../../src/paths.js';
import { startFakeOpenAIServer, type FakeOpenAIServer } from '../../src/testing.js';
import { rejectionOf, thrownBy } from '../rejection.js';
import { repl } from '../repl.js';
import { tempFolder } from '../temp-folder.js';

// Setup files live outside the project on purpose: `rlm` and `zod` must still resolve.
const folder = tempFolder('rlm-setup-files-');
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
    expect(await rejectionOf(loadSetupFiles([path]), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(new RegExp(`Setup file ${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:2:\\d+: `)) });
  });

  it('name the file and line of an error thrown while loading', async () => {
    const path = file('throws.ts', 'const a = 1;\nconst b = 2;\nthrow new Error("cannot connect to the stats database");\nexport const tools = [];\n');
    expect(await rejectionOf(loadSetupFiles([path]), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/Setup file .*throws.ts failed while loading: cannot connect to the stats database \(at .*throws.ts:3:\d+\)/) });
  });

  it('explain missing files, missing exports and bad tools', async () => {
    expect(await rejectionOf(loadSetupFiles([join(folder, 'absent.ts')]), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/Cannot read setup file .*absent.ts: no such file/) });
    expect(await rejectionOf(loadSetupFiles([file('empty.ts', 'export const other = 1;')]), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/exports neither "tools" nor "sandboxSetup"/) });
    expect(await rejectionOf(loadSetupFiles([file('badtool.ts', 'export const tools = [{ name: "bad name", execute() {} }];')]), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/tool #1: Invalid tool name "bad name"/) });
  });

  it('points an error thrown while loading at the setup file and its line, wherever it lives', async () => {
    const path = file('throws-on-load.ts', 'const answer: number = 41;\n\nthrow new Error(`broken at load ${answer + 1}`);\nexport const tools = [];\n');
    expect(await rejectionOf(loadSetupFiles([path]), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringContaining(`Setup file ${path} failed while loading: broken at load 42 (at ${path}:3:7)`) });
  });
});

describe('setup code (the setupCode option)', () => {
  let server: FakeOpenAIServer;
  beforeAll(async () => {
    server = await startFakeOpenAIServer({ reply: () => repl('FINAL(String(double(21)))') });
  });
  afterAll(() => server.close());
  const rlm = (setupCode: ConstructorParameters<typeof RLM>[0]['setupCode']) => new RLM({ model: 'root', baseURL: server.baseURL, setupCode });

  it('takes a TypeScript string as TypeScript, and a JavaScript string as it is', async () => {
    expect((await rlm('const double = (n: number): number => n * 2;').completion('c')).response).toBe('42');
    expect((await rlm('const double = (n) => n < 2 ? n : n * 2;').completion('c')).response).toBe('42');
  });

  it('refuses code that is neither JavaScript nor TypeScript when the RLM is built, naming where, before any model call', () => {
    const before = server.requests.length;
    const broken = () => rlm(['const ok = 1;', 'const double = (n) =>\n  n * ;']);
    expect(thrownBy(broken, ConfigurationError).code).toBe('configuration_error');
    expect(thrownBy(broken, ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/^setupCode\[1\] is not valid JavaScript or TypeScript: Unexpected token at line 2, column 7:\n1 \| const double = \(n\) =>\n2 \|   n \* ;\n  \|       \^$/) });
    const path = file('setup-broken.js', 'const a = 1;\nconst b = ;\n');
    expect(thrownBy(() => rlm({ file: path }), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringContaining(`Setup code file ${path} is not valid JavaScript or TypeScript: Unexpected token at line 2, column 11`) });
    expect(thrownBy(() => rlm({ code: 'const x = (n: number) => n;', language: 'js' }), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/^setupCode is not valid JavaScript: /) });
    expect(server.requests.length).toBe(before);
  });
});
