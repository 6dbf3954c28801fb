import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOpenAIServer, type FakeOpenAIServer, type FakeReply, type FakeRequest } from '../../src/testing.js';
import { repl } from '../repl.js';
import { runCli, scratchFile } from './helpers.js';

/** The root model's replies, in order per run: its n-th request in a run gets script[n] (the last one repeats). */
let script: FakeReply[] = [];
let server: FakeOpenAIServer;
const rootTurns = (request: FakeRequest) => (request.body.messages as { role: string }[]).filter((message) => message.role === 'assistant').length;
beforeAll(async () => {
  server = await startFakeOpenAIServer({ reply: (request) => script[Math.min(rootTurns(request), script.length - 1)]! });
});
afterAll(() => server.close());

const run = (args: string[]) => runCli(['run', '--base-url', server.baseURL, '--model', 'root', '--quiet', '--context', scratchFile('input.txt', 'Ada Lovelace, 36'), ...args, 'Who is it?']);

const personJsonSchema = JSON.stringify({
  type: 'object',
  properties: { name: { type: 'string' }, age: { type: 'integer' } },
  required: ['name', 'age'],
});

describe('rlm run --output-schema', () => {
  it('takes a JSON Schema file: a FINAL that misses a field is refused, and stdout is the value that matches', async () => {
    script = [repl('FINAL({ name: "Ada" })'), repl('FINAL({ name: "Ada", age: 36 })')];
    const result = await run(['--output-schema', scratchFile('person.json', personJsonSchema)]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout.trimEnd().split('\n')).toHaveLength(1);
    expect(JSON.parse(result.stdout)).toEqual({ name: 'Ada', age: 36 });
  });

  it('takes a TypeScript module exporting a zod schema, and --json adds the value as output', async () => {
    const schemaFile = scratchFile(
      'people.ts',
      "import { z } from 'zod';\nconst person = z.object({ name: z.string(), tags: z.array(z.string()) });\nexport const schema: z.ZodType = z.object({ people: z.array(person) });\n",
    );
    script = [repl('FINAL({ people: [{ name: "Ada", tags: null }] })'), repl('FINAL({ people: [{ name: "Ada", tags: ["math"] }] })')];
    const result = await run(['--output-schema', schemaFile, '--json']);
    expect(result.code).toBe(0);
    const printed = JSON.parse(result.stdout) as { response: string; output: unknown; iterations: number };
    expect(printed.output).toEqual({ people: [{ name: 'Ada', tags: ['math'] }] });
    expect(JSON.parse(printed.response)).toEqual(printed.output);
    expect(printed.iterations).toBe(2);
  });

  const badFiles: [string, () => string, string][] = [
    ['a missing file', () => `${scratchFile('here.txt', '')}.missing.json`, 'no such file'],
    ['a .json file that is not JSON', () => scratchFile('broken.json', '{ "type": '), 'not valid JSON'],
    ['a JSON file that is not a schema object', () => scratchFile('list.json', '[1, 2]'), 'JSON Schema object, got an array'],
    ['a module that does not compile', () => scratchFile('broken.ts', 'export const schema = {'), 'broken.ts:1:'],
    ['a module without a schema export', () => scratchFile('empty.ts', 'export const other = 1;\n'), 'exports no `schema`'],
    ['a file of another kind', () => scratchFile('schema.yaml', 'type: object\n'), 'expected a JSON Schema in a .json file'],
  ];
  for (const [name, file, reason] of badFiles) {
    it(`refuses ${name} as a usage error, before any model request`, async () => {
      script = [repl('FINAL({ name: "Ada", age: 36 })')];
      const before = server.requests.length;
      const path = file();
      const result = await run(['--output-schema', path]);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(`--output-schema ${path}`);
      expect(result.stderr).toContain(reason);
      expect(result.stdout).toBe('');
      expect(server.requests.length).toBe(before);
    });
  }

  it('fails with invalid_output (exit 1) when even the forced answer does not match, naming the problems', async () => {
    script = [repl('print(1)'), '{"name": "Ada", "age": "old"}'];
    const schema = scratchFile('person-strict.json', personJsonSchema);
    const plain = await run(['--output-schema', schema, '--max-iterations', '1']);
    expect(plain.code).toBe(1);
    expect(plain.stderr).toContain('does not match the output schema');
    expect(plain.stderr).toContain('age:');
    const json = await run(['--output-schema', schema, '--max-iterations', '1', '--json']);
    expect(json.code).toBe(1);
    const printed = JSON.parse(json.stdout) as { error: { code: string; message: string }; partialAnswer: string };
    expect(printed.error.code).toBe('invalid_output');
    expect(printed.error.message).toContain('age:');
    expect(printed.partialAnswer).toBe('{"name": "Ada", "age": "old"}');
  });
});
