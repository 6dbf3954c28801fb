import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { packageRoot } from '../src/paths.js';

const OK_REPLY = "() => ({ content: 'ok', usage: { prompt_tokens: 20, completion_tokens: 1 } })";

/**
 * Starts the fake OpenAI server in its own process, so its work does not share the event loop of
 * the process being measured. Every request is answered after `latencyMs` by `replySource`, the
 * source text of a FakeOpenAIServerOptions `reply` function (a function cannot cross into another
 * process, and tsx's output of one may name helpers the other process lacks); "ok" unless given.
 */
export async function startServerProcess(latencyMs: number, replySource = OK_REPLY): Promise<{ baseURL: string; close(): void }> {
  const testing = join(packageRoot(), 'dist', 'testing.js');
  const script = `
    const { startFakeOpenAIServer } = await import(${JSON.stringify(testing)});
    const server = await startFakeOpenAIServer({ latencyMs: ${latencyMs}, reply: ${replySource} });
    console.log(server.baseURL);
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [chunk] = (await once(child.stdout!, 'data')) as [Buffer];
  return { baseURL: chunk.toString().trim(), close: () => child.kill() };
}
