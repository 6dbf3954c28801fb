import OpenAI from 'openai';
import { afterEach } from 'vitest';
import { serve, type RunningServer, type ServeOptions } from '../../src/index.js';
import { startFakeOpenAIServer, type FakeOpenAIServer, type FakeReply, type FakeRequest } from '../../src/testing.js';


const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((item) => item.close()));
});

/**
 * An rlm server in front of a fake upstream: the root model ("root") answers from `root` in
 * order (or by a function), the sub model ("sub") from `sub`. Closed after the test.
 */
export async function rlmServer(
  script: { root: FakeReply[] | ((request: FakeRequest) => FakeReply); sub?: (prompt: string) => FakeReply; models?: string[] },
  options: Partial<Omit<ServeOptions, 'run'>> & { run?: ServeOptions['run'] } = {},
): Promise<{ server: RunningServer; upstream: FakeOpenAIServer; client: OpenAI; rootRequests: FakeRequest[] }> {
  const rootRequests: FakeRequest[] = [];
  const queue = Array.isArray(script.root) ? [...script.root] : undefined;
  const upstream = await startFakeOpenAIServer({
    ...(script.models && { models: script.models }),
    reply: (request) => {
      if (request.body.model !== 'root') return script.sub?.(lastText(request)) ?? `sub answer to ${lastText(request)}`;
      rootRequests.push(request);
      if (queue) return queue.shift() ?? { status: 500, error: { message: 'the test scripted no more root replies' } };
      return (script.root as (request: FakeRequest) => FakeReply)(request);
    },
  });
  const server = await serve({ port: 0, ...options, run: { baseURL: upstream.baseURL, maxIterations: 6, ...options.run } });
  open.push(server, upstream);
  const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: options.authToken ?? 'not-needed', maxRetries: 0 });
  return { server, upstream, client, rootRequests };
}

export function lastText(request: FakeRequest): string {
  const last = (request.body.messages as { content?: unknown }[]).at(-1)!;
  return typeof last.content === 'string' ? last.content : JSON.stringify(last.content);
}

/** Every message the root model was sent in its last call, as text. */
export function seenByRoot(request: FakeRequest): string {
  return JSON.stringify(request.body.messages);
}

/** Whether the root model has seen a block's output (the system prompt mentions "REPL output" too). */
export function sawOutput(request: FakeRequest): boolean {
  return (request.body.messages as { role: string; content?: unknown }[]).some((message) => message.role === 'user' && String(message.content).startsWith('Code executed'));
}
