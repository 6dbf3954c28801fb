import { z } from 'zod';

/** RLM's `mcpServers` option: servers by name, each a command (stdio) or a URL (streamable HTTP). */
export const mcpServersSchema = z.record(
  z.string().min(1),
  z.union([
    z.object({ command: z.string().min(1), args: z.array(z.string()).optional(), env: z.record(z.string(), z.string()).optional(), cwd: z.string().optional() }),
    z.object({ url: z.string().url(), headers: z.record(z.string(), z.string()).optional() }),
  ]),
);
