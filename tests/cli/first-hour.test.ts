import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z as zod3 } from 'zod3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigurationError, defineTool } from '../../src/index.js';
import { startFakeOpenAIServer, type FakeOpenAIServer } from '../../src/testing.js';
import { thrownBy } from '../rejection.js';
import { BIN, closedPort, codeThenFinal, runCli, scratch, scratchFile } from './helpers.js';

// What a new user trips over, tried through the real binary.

let server: FakeOpenAIServer;
/** The root model prints `typeof context` and a JSON view of it, then answers with what it saw. */
beforeAll(async () => {
  server = await startFakeOpenAIServer({
    reply: codeThenFinal('print(Array.isArray(context) ? "array:" + context.length : typeof context + ":" + JSON.stringify(context).slice(0, 60))'),
  });
});
afterAll(() => server.close());

const run = (args: string[], stdin?: string) => runCli(['run', '--base-url', server.baseURL, '--model', 'root', ...args], stdin === undefined ? {} : { stdin });

describe('standard input and files', () => {
  it('reads JSON Lines and JSON on stdin as records, and --format overrides', async () => {
    const jsonl = await run(['--context', '-', 'how many?'], '{"id":1}\n{"id":2}\n{"id":3}\n');
    expect(jsonl.stdout).toBe('array:3\n');
    const json = await run(['--context', '-', 'q'], '{"a": [1, 2]}');
    expect(json.stdout).toBe('object:{"a":[1,2]}\n');
    const forced = await run(['--context', '-', '--format', 'text', 'q'], '{"id":1}\n{"id":2}\n');
    expect(forced.stdout).toMatch(/^string:/);
  });

  it('refuses reading stdin twice', async () => {
    const result = await run(['--context', '-', '--context', '-', 'q'], 'x');
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('Standard input can be read only once');
  });

  it('refuses a binary file, and decodes Latin-1 and UTF-16 text', async () => {
    const binary = join(scratch, 'image.bin');
    writeFileSync(binary, Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x00, 0x01]));
    const refused = await run(['--context', binary, 'q']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('looks binary');
    const latin1 = join(scratch, 'latin1.txt');
    writeFileSync(latin1, Buffer.from('café', 'latin1'));
    const decoded = await run(['--context', latin1, 'q']);
    expect(decoded.stdout).toBe('string:"café"\n');
    expect(decoded.stderr).toContain('is not valid UTF-8: read it as Latin-1');
    const utf16 = join(scratch, 'utf16.txt');
    writeFileSync(utf16, Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('naïve ✓', 'utf16le')]));
    expect((await run(['--context', utf16, 'q'])).stdout).toBe('string:"naïve ✓"\n');
  });
});

describe('what is reported first', () => {
  it('reports a missing context file before a missing API key', async () => {
    const missing = join(scratch, 'no-such-file.txt');
    // A remote endpoint without a key, and no endpoint at all (then local servers are looked for).
    for (const endpoint of [['--base-url', 'https://api.example.com/v1'], []]) {
      const result = await runCli(['run', ...endpoint, '--context', missing, 'q']);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(`Context file not found: ${missing}`);
      expect(result.stderr).not.toContain('OPENAI_API_KEY');
    }
  });

  it('says how to read a .json or .jsonl file that is not JSON as text', async () => {
    const json = await run(['--context', scratchFile('notes.json', 'not json at all'), 'q']);
    expect(json.code).toBe(2);
    expect(json.stderr).toContain('is not valid JSON');
    expect(json.stderr).toContain('pass --format text to read it as plain text');
    const jsonl = await run(['--context', scratchFile('notes.jsonl', '{"a":1}\nplain line\n'), 'q']);
    expect(jsonl.stderr).toContain('line 2, is not valid JSON');
    expect(jsonl.stderr).toContain('pass --format text to read it as plain text');
  });

  it('fails on setup code that does not parse, naming the file, before any model call', async () => {
    const before = server.requests.length;
    const setup = scratchFile('broken-sandbox-setup.ts', 'export const sandboxSetup = "const ready = ;";\n');
    const result = await run(['--context', scratchFile('f.txt', 'x'), '--setup', setup, 'q']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`Setup file ${setup}, sandboxSetup is not valid JavaScript or TypeScript: Unexpected token at line 1, column 15`);
    expect(server.requests.length).toBe(before);
  });
});

describe('large files', () => {
  it('lets the worker read a large text file, and still refuses or decodes large files that are not UTF-8 text', async () => {
    const big = join(scratch, 'big.log');
    writeFileSync(big, 'line of text\n'.repeat(800_000));
    expect((await run(['--context', big, 'q'])).stdout).toBe(`string:${JSON.stringify('line of text\n'.repeat(5)).slice(0, 60)}\n`);
    // The root model was told the file's size: this process never read the text.
    expect(JSON.stringify(server.requests.at(-1)!.body.messages)).toContain('a text file of 10,400,000 bytes');
    const bigBinary = join(scratch, 'big.bin');
    writeFileSync(bigBinary, Buffer.concat([Buffer.from([0, 1, 2]), Buffer.alloc(9 * 2 ** 20, 65)]));
    expect((await run(['--context', bigBinary, 'q'])).code).toBe(2);
    const bigLatin1 = join(scratch, 'big-latin1.txt');
    writeFileSync(bigLatin1, Buffer.from('café '.repeat(2_000_000), 'latin1'));
    const decoded = await run(['--context', bigLatin1, 'q']);
    expect(decoded.stdout).toMatch(/^string:"café café/);
    expect(decoded.stderr).toContain('read it as Latin-1');
  });
});

describe('the question', () => {
  it('joins an unquoted question, and refuses two questions', async () => {
    const joined = await run(['--context', scratchFile('q.txt', 'abc'), 'what', 'is', 'this']);
    expect(joined.code).toBe(0);
    expect(server.requests.at(-1)!.body.messages).toEqual(expect.arrayContaining([expect.objectContaining({ content: expect.stringContaining('"what is this"') })]));
    const twice = await run(['--context', scratchFile('q.txt', 'abc'), '--query', 'Q1', 'Q2']);
    expect(twice.code).toBe(2);
    expect(twice.stderr).toContain('Give the question once');
  });

  it('refuses a run with no question, before any model call', async () => {
    const before = server.requests.length;
    const result = await run(['--context', scratchFile('q.txt', 'abc')]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('Give the question as the last argument or with --query');
    expect(server.requests.length).toBe(before);
  });

  it('suggests `rlm run` when the command was left out', async () => {
    const result = await runCli(['--context', 'x.txt', 'What is this?']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('did you mean "rlm run --context x.txt What is this?"');
  });
});

describe('errors in the terms of the flags', () => {
  it('names the flag and its unit', async () => {
    const memory = await run(['--context', scratchFile('f.txt', 'x'), '--memory-limit', '1', 'q']);
    expect(memory.stderr).toContain('--memory-limit 1: the sandbox needs at least 16 MB of heap');
    const timeout = await run(['--context', scratchFile('f.txt', 'x'), '--block-timeout', '0.0001', 'q']);
    expect(timeout.stderr).toContain('--block-timeout 0.0001: the time is in seconds and must be at least 0.001');
    const prompt = await run(['--context', scratchFile('f.txt', 'x'), '--system-prompt', 'nope.md', 'q']);
    expect(prompt.stderr).toContain('Cannot read --system-prompt file nope.md: no such file.');
    for (const result of [memory, timeout, prompt]) expect(result.code).toBe(2);
  });

  it('checks the base URL before anything else', async () => {
    const result = await runCli(['run', '--base-url', 'localhost:9/v1', '--context', scratchFile('f.txt', 'x'), 'q']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--base-url localhost:9/v1 is not an http(s) URL: write it in full, e.g. http://localhost:9/v1');
  });

  it('names the URL and the fix when nothing listens there, without doubled full stops', async () => {
    const closed = await closedPort();
    const result = await runCli(['run', '--base-url', `http://127.0.0.1:${closed}/v1`, '--model', 'm', '--context', scratchFile('f.txt', 'x'), 'q']);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`cannot reach http://127.0.0.1:${closed}/v1 (connection refused). Check that the server is running`);
    expect(result.stderr).not.toMatch(/\.\./);
  });
});

describe('an upstream that refuses the key', () => {
  it('says HTTP 401 once, with the fix, and no doubled full stop', async () => {
    const refusing = await startFakeOpenAIServer({ reply: () => ({ status: 401, error: { message: 'Incorrect API key provided.' } }) });
    try {
      const result = await runCli(['run', '--base-url', refusing.baseURL, '--api-key', 'sk-wrong', '--model', 'm', '--context', scratchFile('f.txt', 'x'), 'q']);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain('Model request failed (HTTP 401): Incorrect API key provided. Check the API key.');
      expect(result.stderr).not.toMatch(/401.*401|\.\./);
    } finally {
      await refusing.close();
    }
  });
});

describe('output', () => {
  it('ends quietly when the reader closes the pipe early', async () => {
    const result = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [BIN, 'run', '--help'], { stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.stdout.once('data', () => child.stdout.destroy());
      child.on('close', (code) => resolve({ code, stderr }));
    });
    expect(result.stderr).not.toContain('EPIPE');
    expect(result.code).toBe(0);
  });

  it('prints the log path at the end', async () => {
    const result = await run(['--context', scratchFile('f.txt', 'x'), '--log-dir', join(scratch, 'logs-at-end'), 'q']);
    expect(result.stderr).toMatch(/rlm: log: .*logs-at-end\/rlm_.*\.jsonl\n/);
  });

  it("prints usage in the library's shape with --json, its cost null when a model has no price", async () => {
    const unpriced = JSON.parse((await run(['--context', scratchFile('f.txt', 'x'), '--json', 'q'])).stdout);
    expect(unpriced.usage).toEqual({ byModel: { root: { calls: 2, inputTokens: expect.any(Number), outputTokens: expect.any(Number), costUsd: null } }, calls: 2, inputTokens: expect.any(Number), outputTokens: expect.any(Number), costUsd: null, costComplete: false });
    expect(unpriced).not.toHaveProperty('costUsd');
    const priced = JSON.parse((await run(['--context', scratchFile('f.txt', 'x'), '--price', 'root=1,2', '--json', 'q'])).stdout);
    expect(priced.usage).toMatchObject({ costUsd: expect.any(Number), costComplete: true, byModel: { root: { costUsd: priced.usage.costUsd } } });
  });

  it('does not call the replies code when the first request failed and there were none', async () => {
    const refusing = await startFakeOpenAIServer({ reply: () => ({ status: 400, error: { message: 'Unknown model.' } }) });
    try {
      const result = await runCli(['run', '--base-url', refusing.baseURL, '--model', 'm', '--context', scratchFile('f.txt', 'x'), 'q']);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain('rlm: the run had no answer: it stopped before the model replied.');
      expect(result.stderr).not.toContain('its replies so far were code');
    } finally {
      await refusing.close();
    }
  });

  it('says the cost is unknown for unpriced models instead of $0.0000', async () => {
    const result = await run(['--context', scratchFile('f.txt', 'x'), 'q']);
    expect(result.stderr).toContain('cost unknown (no prices for these models)');
    expect(result.stderr).not.toContain('$0.0000');
  });
});

describe('tool schemas', () => {
  it('refuses a zod 3 schema instead of sending it as JSON Schema and validating nothing', () => {
    const refused = thrownBy(() => defineTool({ name: 'lookup', parameters: zod3.object({ id: zod3.string() }) as never, execute: () => 'x' }), ConfigurationError);
    expect(refused).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/its parameters are a zod 3 schema .* rlm needs zod 4/) });
  });
});
