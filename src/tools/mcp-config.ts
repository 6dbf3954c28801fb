// MCP server configuration: the `mcpServers` format assistants (Claude Desktop, Cursor, VS Code)
// already use. Checked by hand: the CLI reads it on its start-up path, where zod and the MCP SDK
// are not loaded (RLM options check it again with mcpServersSchema).
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';

/** One server: a command to start (stdio) or a URL (streamable HTTP). */
export type McpServerConfig = { command: string; args?: string[] | undefined; env?: Record<string, string> | undefined; cwd?: string | undefined } | { url: string; headers?: Record<string, string> | undefined };

/** Reads a `{ "mcpServers": { NAME: { command, args, env } | { url } } }` file; throws what is wrong with it. */
export function readMcpConfigFile(path: string): Record<string, McpServerConfig> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new Error(`cannot read it (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new Error(`it is not JSON (${(error as Error).message})`);
  }
  const servers = (json as { mcpServers?: unknown } | null)?.mcpServers;
  if (servers === undefined) throw new Error('it has no "mcpServers" object, e.g. { "mcpServers": { "files": { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."] } } }');
  if (servers === null || typeof servers !== 'object' || Array.isArray(servers)) throw new Error('"mcpServers" must be an object of servers by name');
  for (const [name, server] of Object.entries(servers)) {
    const problem = serverProblem(server);
    if (problem) throw new Error(`mcpServers.${name}: ${problem}`);
  }
  return servers as Record<string, McpServerConfig>;
}

function serverProblem(server: unknown): string | undefined {
  const isStrings = (value: unknown, kind: 'array' | 'record') =>
    value === undefined || (kind === 'array' ? Array.isArray(value) && value.every((item) => typeof item === 'string') : value !== null && typeof value === 'object' && Object.values(value).every((item) => typeof item === 'string'));
  if (server === null || typeof server !== 'object') return 'expected an object with "command" or "url"';
  const { command, args, env, url, headers } = server as Record<string, unknown>;
  if (typeof command === 'string' && command !== '') {
    if (!isStrings(args, 'array')) return '"args" must be an array of strings';
    if (!isStrings(env, 'record')) return '"env" must map names to strings';
    return undefined;
  }
  if (typeof url === 'string') {
    if (!URL.canParse(url)) return `"url" is not a URL: ${url}`;
    if (!isStrings(headers, 'record')) return '"headers" must map names to strings';
    return undefined;
  }
  return 'each server needs "command" (with optional "args", "env", "cwd") or "url"';
}

/** `--mcp "COMMAND ARGS"`: one stdio server, named after its command (or its package). */
export function mcpShorthand(commandLine: string): [name: string, config: McpServerConfig] {
  const words = commandLine.match(/"[^"]*"|'[^']*'|\S+/g)?.map((word) => word.replace(/^(["'])(.*)\1$/, '$2')) ?? [];
  if (words.length === 0) throw new Error('expected a command, e.g. --mcp "npx -y @modelcontextprotocol/server-everything"');
  const [command, ...args] = words as [string, ...string[]];
  const named = ['npx', 'node', 'uvx', 'python', 'python3', 'bunx', 'deno'].includes(basename(command)) ? args.find((arg) => !arg.startsWith('-')) : undefined;
  const name = basename(named ?? command).replace(/\.[cm]?[jt]s$|\.py$/, '').replace(/^@[^/]+\//, '') || 'mcp';
  return [name, { command, args }];
}
