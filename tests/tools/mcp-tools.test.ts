import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { z } from 'zod';
import { afterAll, describe, expect, it } from 'vitest';
import { RLM } from '../../src/index.js';
import { packageRoot } from '../../src/paths.js';
import { closeMcpServers } from '../../src/tools/mcp-tools.js';
import { models } from '../engine/helpers.js';
import { repl } from '../repl.js';

const FIXTURE = join(packageRoot(), 'tests', 'fixtures', 'mcp-server.mjs');
const testServer = { command: process.execPath, args: [FIXTURE] };

afterAll(() => closeMcpServers());

/** Runs `code` as the root model's one block and returns what it printed. */
async function printed(code: string, options: { mcpServers: Record<string, unknown>; sub?: Parameters<typeof models>[1] }): Promise<{ output: string; warnings: string[] }> {
  const { rootModel, languageModel } = models([repl(code), 'FINAL(done)'], options.sub ?? []);
  const rlm = new RLM({ model: 'root', subModel: 'sub', languageModel, mcpServers: options.mcpServers as never });
  const { warnings } = await rlm.prepare();
  await rlm.completion('c');
  const output = String(rootModel.calls[1]!.messages.find((message) => String(message.content).startsWith('Code executed'))!.content).split('REPL output:\n')[1]!;
  return { output, warnings: warnings ?? [] };
}

describe('MCP servers’ tools in the REPL', () => {
  it('are callable as tools.NAME, tool_handler and through llm_query with TOOLS', async () => {
    const code = [
      'const direct = tools.add({ a: 2, b: 3 });',
      'const text = tool_handler("shout", { text: "hi" });',
      'const viaModel = llm_query("add 4 and 5", { tools: TOOLS, tool_handler });',
      'print(JSON.stringify({ direct, text, viaModel, names: TOOLS.map((t) => t.function.name).sort() }))',
    ].join('\n');
    const { output } = await printed(code, { mcpServers: { demo: testServer }, sub: [{ toolCalls: [{ name: 'add', arguments: { a: 4, b: 5 } }] }, 'the sum is 9'] });
    expect(JSON.parse(output.split('\n')[0]!)).toEqual({ direct: { sum: 5 }, text: 'HI', viaModel: 'the sum is 9', names: ['add', 'crash', 'refuse', 'shout'] });
  });

  it('check arguments against the input schema, and report error results and dead servers as catchable errors naming server and tool', async () => {
    const code = [
      'const errors = [];',
      'for (const call of [() => tools.add({ a: "x", b: 1 }), () => tools.refuse({}), () => tools.crash({}), () => tools.shout({ text: "after" })]) {',
      '  try { errors.push(String(call())) } catch (e) { errors.push(e.message) }',
      '}',
      'print(JSON.stringify(errors))',
    ].join('\n');
    const { output } = await printed(code, { mcpServers: { fragile: testServer } });
    const [invalid, refused, crashed, after] = JSON.parse(output.split('\n')[0]!) as string[];
    expect(invalid).toMatch(/Invalid arguments for add/);
    expect(refused).toBe('MCP server "fragile" tool "refuse" returned an error: not today');
    expect(crashed).toMatch(/^MCP server "fragile" tool "crash" failed: /);
    expect(after).toMatch(/^MCP server "fragile" tool "shout" failed: /);
    // The next RLM that asks for the server starts it again.
    const again = await printed('print(tools.shout({ text: "back" }))', { mcpServers: { fragile: testServer } });
    expect(again.output.split('\n')[0]).toBe('BACK');
  });

  it('reach servers over streamable HTTP', async () => {
    // Stateless: a server and transport per request, as the SDK documents.
    const http = createServer(async (request, response) => {
      const server = new McpServer({ name: 'http-tools', version: '1.0.0' });
      server.registerTool('remote_echo', { description: 'Echoes', inputSchema: { text: z.string() } }, ({ text }) => ({ content: [{ type: 'text', text: `remote: ${text}` }] }));
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      response.on('close', () => void transport.close());
      await server.connect(transport);
      await transport.handleRequest(request, response);
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
      const { output } = await printed('print(tools.remote_echo({ text: "hi" }))', { mcpServers: { remote: { url } } });
      expect(output.split('\n')[0]).toBe('remote: hi');
    } finally {
      await closeMcpServers();
      http.closeAllConnections();
      await new Promise((resolve) => http.close(resolve));
    }
  });

  it('name a clashing tool SERVER__TOOL, and skip a server that cannot start with a warning', async () => {
    const code = 'print(JSON.stringify([tools.add({ a: 1, b: 1 }), tools.second__add({ a: 2, b: 2 }), typeof tools.missing]))';
    const { output, warnings } = await printed(code, { mcpServers: { first: testServer, second: { ...testServer, env: { MARK: '2' } }, broken: { command: '/nonexistent/mcp-server' } } });
    expect(JSON.parse(output.split('\n')[0]!)).toEqual([{ sum: 2 }, { sum: 4 }, 'undefined']);
    expect(warnings).toEqual([expect.stringMatching(/^MCP server "broken" could not be started: .*Its tools are not available\.$/)]);
  });
});
