import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/paths.js';
import { startFakeOpenAIServer, type FakeOpenAIServer, type FakeRequest } from '../../src/testing.js';
import { eventually } from '../processes.js';
import { BIN, codeThenFinal, scratchFile } from './helpers.js';
import { repl } from '../repl.js';
import { tempFolder } from '../temp-folder.js';

const FIXTURE = join(packageRoot(), 'tests', 'fixtures', 'mcp-server.mjs');
const texts = (request: FakeRequest) => (request.body.messages as { content?: unknown }[]).map((message) => String(message.content));
let upstream: FakeOpenAIServer;
let client: Client;
const logDir = tempFolder('rlm-mcp-logs-');

const answer = codeThenFinal((request) =>
  texts(request).some((text) => text.includes('use tools'))
    ? 'print(tools.add({ a: 1, b: 2 }).sum)'
    : 'print(typeof context === "string" ? context.length + ":" + context.slice(0, 5) : JSON.stringify(context).slice(0, 40))',
);

beforeAll(async () => {
  // Root model: prints the context's length and start, then answers with what it printed; a query
  // containing "slowly" keeps printing (one second a turn) until cancelled.
  upstream = await startFakeOpenAIServer({
    reply: (request) => {
      const all = texts(request);
      if (all.some((text) => text.includes('slowly'))) return { content: repl('print(1)'), delayMs: 1000 };
      // "structured": a first FINAL the schema refuses (words is not an array), then one it takes.
      if (all.some((text) => text.includes('structured'))) {
        return all.some((text) => text.includes('Code executed')) ? repl('FINAL({ length: context.length, words: context.split(" ") })') : repl('FINAL({ length: context.length, words: 2 })');
      }
      return answer(request);
    },
  });
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, 'mcp', '--base-url', upstream.baseURL, '--model', 'root', '--max-iterations', '30', '--log-dir', logDir, '--mcp', `${process.execPath} ${FIXTURE}`],
    env: { PATH: process.env.PATH ?? '', HOME: tmpdir() },
    stderr: 'pipe',
  });
  client = new Client({ name: 'rlm-test', version: '1.0.0' });
  await client.connect(transport);
});

afterAll(async () => {
  await client?.close();
  await upstream?.close();
});

describe('rlm mcp', () => {
  it('lists rlm_completion with its arguments', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toEqual(['rlm_completion']);
    expect(Object.keys(tools[0]!.inputSchema.properties ?? {})).toEqual(['query', 'context', 'context_paths', 'model', 'sub_model', 'output_schema']);
    expect(tools[0]!.inputSchema.required).toEqual(['query']);
  });

  it('answers about inline context, with usage, cost and iterations as structured content', async () => {
    const result = await client.callTool({ name: 'rlm_completion', arguments: { query: 'How long?', context: 'hello world' } });
    expect(result.isError).toBeFalsy();
    expect(result.content).toEqual([{ type: 'text', text: '11:hello' }]);
    expect(result.structuredContent).toMatchObject({ iterations: 2, forced: false, usage: { calls: 2, costUsd: null, costComplete: false, byModel: { root: { calls: 2 } } } });
  });

  it('answers with a value matching output_schema, as structured content (output) and as JSON text', async () => {
    const output_schema = { type: 'object', properties: { length: { type: 'integer' }, words: { type: 'array', items: { type: 'string' } } }, required: ['length', 'words'] };
    const result = await client.callTool({ name: 'rlm_completion', arguments: { query: 'structured, please', context: 'hello world', output_schema } });
    expect(result.isError).toBeFalsy();
    const value = { length: 11, words: ['hello', 'world'] };
    expect(result.structuredContent).toMatchObject({ output: value, iterations: 2 });
    expect(result.content).toEqual([{ type: 'text', text: JSON.stringify(value) }]);
  });

  it('answers a schema it cannot use with a tool error, before any model request', async () => {
    const before = upstream.requests.length;
    const result = await client.callTool({ name: 'rlm_completion', arguments: { query: 'structured', context: 'x', output_schema: { type: 'objectx' } } });
    expect(result.isError).toBe(true);
    expect(JSON.stringify(result.content)).toContain('output_schema cannot be used');
    expect(JSON.stringify(result.content)).toContain('objectx');
    expect(upstream.requests.length).toBe(before);
  });

  it('reads files named in context_paths, and reports progress when asked', async () => {
    const file = scratchFile('mcp-context.txt', 'abcdefgh'.repeat(1000));
    const progress: { progress: number; total?: number }[] = [];
    const result = await client.callTool({ name: 'rlm_completion', arguments: { query: 'How long?', context_paths: [file] } }, undefined, { onprogress: (update) => progress.push(update) });
    expect(result.content).toEqual([{ type: 'text', text: '8000:abcde' }]);
    expect(progress).toEqual([
      expect.objectContaining({ progress: 1, total: 30 }),
      expect.objectContaining({ progress: 2, total: 30 }),
    ]);
  });

  it('mounts MCP servers for the runs it makes (--mcp)', async () => {
    const result = await client.callTool({ name: 'rlm_completion', arguments: { query: 'use tools', context: 'x' } });
    expect(result.content).toEqual([{ type: 'text', text: '3' }]);
  });

  it('says what went wrong as a tool error for a missing file, without suggesting standard input', async () => {
    const result = await client.callTool({ name: 'rlm_completion', arguments: { query: 'q', context_paths: ['/nonexistent/file.txt'] } });
    expect(result.isError).toBe(true);
    expect(JSON.stringify(result.content)).toContain('Context file not found: /nonexistent/file.txt. Pass an existing file or folder.');
    expect(JSON.stringify(result.content)).not.toMatch(/standard input/);
  });

  it('stops the run when the client cancels the call', async () => {
    const before = new Set(readdirSync(logDir));
    const controller = new AbortController();
    const call = client.callTool({ name: 'rlm_completion', arguments: { query: 'count slowly', context: 'x' } }, undefined, { signal: controller.signal });
    setTimeout(() => controller.abort(), 1_500);
    await expect(call).rejects.toThrow(/abort/i);
    let end: unknown;
    const ended = await eventually(() => {
      const file = readdirSync(logDir).find((name) => !before.has(name));
      const last = file ? readFileSync(join(logDir, file), 'utf8').trim().split('\n').at(-1) : undefined;
      end = last ? JSON.parse(last) : undefined;
      return (end as { type?: string } | undefined)?.type === 'run_end';
    }, 10_000);
    expect(ended).toBe(true);
    expect(end).toMatchObject({ status: 'interrupted' });
  });
});

describe('rlm mcp without an API key', () => {
  it('starts, and answers every call with a tool error that says how to give the key', async () => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [BIN, 'mcp', '--base-url', 'https://api.example.com/v1'],
      env: { PATH: process.env.PATH ?? '', HOME: tmpdir() },
      stderr: 'pipe',
    });
    const keyless = new Client({ name: 'rlm-test', version: '1.0.0' });
    await keyless.connect(transport);
    try {
      const result = await keyless.callTool({ name: 'rlm_completion', arguments: { query: 'q', context: 'x' } });
      expect(result.isError).toBe(true);
      const text = (result.content as { text: string }[])[0]!.text;
      expect(text).toContain('OPENAI_API_KEY is not set');
      expect(text).toContain('set OPENAI_API_KEY under "env"');
    } finally {
      await keyless.close();
    }
  });
});
