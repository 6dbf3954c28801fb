import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Hono } from 'hono';
import OpenAI from 'openai';
import { afterEach } from 'vitest';
import { ChatCompletions, DEFAULTS, Responses, RLM, serve, type RunningServer, type ServeOptions } from '../../src/index.js';
import { createApp, type AppOptions } from '../../src/server/app.js';
import { startFakeOpenAIServer, type FakeOpenAIServer, type FakeReply, type FakeRequest } from '../../src/testing.js';


const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((item) => item.close()));
});

type RootScript = FakeReply[] | ((request: FakeRequest) => FakeReply | Promise<FakeReply>);
interface Script {
  root: RootScript;
  sub?: (prompt: string) => FakeReply;
  models?: string[];
}

/**
 * A fake upstream: the root model ("root") answers from `root` in order (or by a function), the
 * sub model ("sub") from `sub`. Closed after the test.
 */
async function scriptedUpstream(script: Script): Promise<{ upstream: FakeOpenAIServer; rootRequests: FakeRequest[] }> {
  const rootRequests: FakeRequest[] = [];
  const queue = Array.isArray(script.root) ? [...script.root] : undefined;
  const upstream = await startFakeOpenAIServer({
    ...(script.models && { models: script.models }),
    reply: (request) => {
      if (request.body.model !== 'root') return script.sub?.(lastText(request)) ?? `sub answer to ${lastText(request)}`;
      rootRequests.push(request);
      if (queue) return queue.shift() ?? { status: 500, error: { message: 'the test scripted no more root replies' } };
      return (script.root as Exclude<RootScript, FakeReply[]>)(request);
    },
  });
  open.push(upstream);
  return { upstream, rootRequests };
}

/** An rlm server on a real port in front of a scripted upstream (see scriptedUpstream). Closed after the test. */
export async function rlmServer(
  script: Script,
  options: Partial<Omit<ServeOptions, 'run'>> & { run?: ServeOptions['run'] } = {},
): Promise<{ server: RunningServer; upstream: FakeOpenAIServer; client: OpenAI; rootRequests: FakeRequest[] }> {
  const { upstream, rootRequests } = await scriptedUpstream(script);
  const server = await serve({ port: 0, ...options, run: { baseURL: upstream.baseURL, maxIterations: 6, ...options.run } });
  open.push(server);
  const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: options.authToken ?? 'not-needed', maxRetries: 0 });
  return { server, upstream, client, rootRequests };
}

/**
 * The same API in this process, without a socket: hono's `app.request()` answers, and the openai
 * client's fetch goes through it. Its paused runs are stopped after the test.
 */
export async function rlmApp(
  script: Script,
  options: Partial<Omit<AppOptions, 'completions' | 'responses' | 'listModels'>> & { pausedRunTtlMs?: number; responseTtlMs?: number; run?: Partial<ServeOptions['run']> } = {},
): Promise<{
  app: Hono;
  completions: ChatCompletions;
  responses: Responses;
  client: OpenAI;
  upstream: FakeOpenAIServer;
  rootRequests: FakeRequest[];
  post: (body: string, headers?: Record<string, string>, path?: string) => Promise<Posted>;
}> {
  const { upstream, rootRequests } = await scriptedUpstream(script);
  const { pausedRunTtlMs, responseTtlMs, run, ...appOptions } = options;
  const runHost = {
    rlmFor: ({ root, sub }: { root: string; sub: string }) => new RLM({ baseURL: upstream.baseURL, maxIterations: 6, ...run, model: root, subModel: sub }),
    ...(pausedRunTtlMs !== undefined && { pausedRunTtlMs }),
  };
  const completions = new ChatCompletions(runHost);
  const responses = new Responses({ ...runHost, ...(responseTtlMs !== undefined && { responseTtlMs }) });
  open.push({ close: async () => completions.close() }, { close: async () => responses.close() });
  const app = createApp({
    completions,
    responses,
    listModels: async () => script.models ?? [],
    maxBodyBytes: DEFAULTS.server.maxBodyBytes,
    maxConcurrentRuns: DEFAULTS.server.maxConcurrentRuns,
    keepAliveMs: DEFAULTS.server.keepAliveMs,
    ...appOptions,
  });
  const client = new OpenAI({ baseURL: `${IN_PROCESS}/v1`, apiKey: options.authToken ?? 'not-needed', maxRetries: 0, fetch: async (url, init) => app.request(url, init) });
  const post = (body: string, headers: Record<string, string> = {}, path = '/v1/chat/completions') => postTo(app, body, headers, path);
  return { app, completions, responses, client, upstream, rootRequests, post };
}

/** The origin requests to an in-process app are addressed to: nothing listens there. */
const IN_PROCESS = 'http://rlm.in-process';

export interface Posted {
  status: number;
  headers: Headers;
  body: { error: { message: string; type: string; param: string | null; code: string } };
}

/** POSTs a raw body to a path of an in-process app (/v1/chat/completions by default), and reads the error object it answers with. */
async function postTo(app: Hono, body: string, headers: Record<string, string>, path: string): Promise<Posted> {
  const response = await app.request(`${IN_PROCESS}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Posted['body'] };
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

/** Whether a run logged to `logDir` has ended (its log holds a run_end record). */
export function runEnded(logDir: string): boolean {
  return readdirSync(logDir).some((file) => readFileSync(join(logDir, file), 'utf8').includes('"type":"run_end"'));
}

/** `response` with its body passed through unchanged, calling `onText` with all text read so far. */
export function tapped(response: Response, onText: (text: string) => void): Response {
  const decoder = new TextDecoder();
  let text = '';
  const body = response.body!.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        text += decoder.decode(chunk, { stream: true });
        onText(text);
        controller.enqueue(chunk);
      },
    }),
  );
  return new Response(body, response);
}

/** How many keep-alive comment lines an SSE text holds. */
export const keepAlives = (text: string) => text.match(/^: keep-alive$/gm)?.length ?? 0;
