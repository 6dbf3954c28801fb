// Tools of MCP servers as host tools: every tool of every configured server becomes a tool like
// those from setup files (tools.NAME, tool_handler, TOOLS), its arguments checked against the
// server's input schema before the call. Servers are started once per process, shared by runs, and
// stopped when the process exits.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { describeError } from '../errors.js';
import { defineTool, type AnyTool } from './define.js';
import type { McpServerConfig } from './mcp-config.js';
import type { JsonSchema } from './schema.js';

interface Connection {
  client: Client;
  tools: { name: string; description?: string | undefined; inputSchema: unknown }[];
}

const connections = new Map<string, Promise<Connection>>();

/** Stops every MCP server this process started (also done on exit). */
export async function closeMcpServers(): Promise<void> {
  const open = [...connections.values()];
  connections.clear();
  await Promise.all(open.map((connection) => connection.then((c) => c.client.close(), () => {})));
}

// A stdio server is a child process: make sure none outlives us, even on process.exit().
const childPids = new Set<number>();
process.once('exit', () => {
  for (const pid of childPids) {
    try {
      process.kill(pid);
    } catch {
      // already gone
    }
  }
});

function connect(name: string, config: McpServerConfig): Promise<Connection> {
  const key = `${name}\u0000${JSON.stringify(config)}`;
  let connection = connections.get(key);
  if (!connection) {
    connection = (async () => {
      const client = new Client({ name: 'rlm', version: '1' });
      const transport =
        'command' in config
          ? new StdioClientTransport({ command: config.command, args: config.args ?? [], env: { ...inheritedEnv(), ...config.env }, ...(config.cwd && { cwd: config.cwd }), stderr: 'ignore' })
          : new StreamableHTTPClientTransport(new URL(config.url), { requestInit: { headers: config.headers ?? {} } });
      await client.connect(transport);
      const pid = transport instanceof StdioClientTransport ? transport.pid : null;
      // A server that died is started again by the next RLM that asks for it.
      client.onclose = () => {
        if (connections.get(key) === connection) connections.delete(key);
        if (pid) childPids.delete(pid);
      };
      const tools = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor ? { cursor } : undefined);
        tools.push(...page.tools);
        cursor = page.nextCursor;
      } while (cursor);
      if (pid) childPids.add(pid);
      return { client, tools };
    })();
    connections.set(key, connection);
    connection.catch(() => connections.delete(key)); // a later run tries again
  }
  return connection;
}

/** What a stdio server gets from our environment: enough to find its interpreter, no secrets. */
function inheritedEnv(): Record<string, string> {
  const keep = ['PATH', 'HOME', 'USER', 'LANG', 'TMPDIR', 'SystemRoot', 'APPDATA'];
  return Object.fromEntries(keep.flatMap((key) => (process.env[key] ? [[key, process.env[key]!]] : [])));
}

/**
 * The tools of the given servers, named as the server names them (made valid for models); a name
 * already taken becomes SERVER__TOOL. A server that cannot be started contributes no tools and a
 * problem saying why.
 */
export async function loadMcpTools(servers: Record<string, McpServerConfig>, taken: Iterable<string>): Promise<{ tools: AnyTool[]; problems: string[] }> {
  const names = new Set(taken);
  const tools: AnyTool[] = [];
  const problems: string[] = [];
  const started = await Promise.allSettled(Object.entries(servers).map(([server, config]) => connect(server, config)));
  for (const [index, server] of Object.keys(servers).entries()) {
    const result = started[index]!;
    if (result.status === 'rejected') {
      const reason = describeError(result.reason).message;
      problems.push(`MCP server "${server}" could not be started: ${reason}. Its tools are not available.`);
      continue;
    }
    for (const tool of result.value.tools) {
      let name = validName(tool.name);
      if (names.has(name)) name = validName(`${server}__${tool.name}`);
      names.add(name);
      tools.push(mcpTool(server, tool, name, result.value.client));
    }
  }
  return { tools, problems };
}

function validName(name: string): string {
  return name.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64) || 'tool';
}

function mcpTool(server: string, tool: Connection['tools'][number], name: string, client: Client): AnyTool {
  const label = `MCP server "${server}" tool "${tool.name}"`;
  return defineTool({
    name,
    description: tool.description ?? `${tool.name} (from the MCP server ${server})`,
    parameters: tool.inputSchema as JsonSchema,
    execute: async (args, { signal }) => {
      let result;
      try {
        result = await client.callTool({ name: tool.name, arguments: args }, undefined, { signal });
      } catch (error) {
        throw new Error(`${label} failed: ${(error as Error).message}`);
      }
      if (result.isError) throw new Error(`${label} returned an error: ${textOf(result.content) || 'no details'}`);
      if (result.structuredContent !== undefined) return result.structuredContent;
      return textOf(result.content) ?? result.content;
    },
  }) as AnyTool;
}

/** The text of a result's content when it is all text; undefined when it holds other kinds. */
function textOf(content: unknown): string | undefined {
  if (!Array.isArray(content) || !content.every((part) => part?.type === 'text')) return undefined;
  return content.map((part: { text: string }) => part.text).join('\n');
}
