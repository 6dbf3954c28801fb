import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/paths.js';
import { startFakeOpenAIServer, type FakeOpenAIServer } from '../../src/testing.js';
import { codeThenFinal, runCli, scratchFile } from './helpers.js';

const FIXTURE = join(packageRoot(), 'tests', 'fixtures', 'mcp-server.mjs');
let upstream: FakeOpenAIServer;

beforeAll(async () => {
  // Root model: calls the MCP tools, then answers with what the block printed.
  upstream = await startFakeOpenAIServer({ reply: codeThenFinal('print(tools.add({ a: 20, b: 22 }).sum, tool_handler("shout", { text: "ok" }))') });
});
afterAll(() => upstream.close());

const run = (...flags: string[]) => runCli(['run', '--base-url', upstream.baseURL, '--model', 'root', '--context', scratchFile('mount.txt', 'x'), ...flags, 'q']);

describe('mounting MCP servers from the command line', () => {
  it('takes an mcpServers config file', async () => {
    const config = scratchFile('mcp.json', JSON.stringify({ mcpServers: { demo: { command: process.execPath, args: [FIXTURE] } } }));
    const result = await run('--mcp-config', config);
    expect(result.stderr).not.toContain('could not be started');
    expect(result).toMatchObject({ code: 0, stdout: '42 OK\n' });
  });

  it('takes --mcp "COMMAND ARGS" for one stdio server', async () => {
    const result = await run('--mcp', `${process.execPath} ${FIXTURE}`);
    expect(result).toMatchObject({ code: 0, stdout: '42 OK\n' });
  });

  it('refuses a bad config file with exit 2, naming the file and the problem', async () => {
    const notJson = scratchFile('bad.json', '{ mcpServers: ');
    const noServers = scratchFile('empty.json', '{}');
    const badServer = scratchFile('bad-server.json', JSON.stringify({ mcpServers: { files: { args: ['x'] } } }));
    for (const [file, problem] of [
      [notJson, 'it is not JSON'],
      [noServers, 'it has no "mcpServers" object'],
      [badServer, 'mcpServers.files: each server needs "command"'],
      ['/nonexistent/mcp.json', 'cannot read it (ENOENT)'],
    ] as const) {
      const result = await run('--mcp-config', file);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(`--mcp-config ${file}: ${problem}`);
    }
  });
});
