import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What the fake server answers to one chat completion request. */
export type FakeReply =
  | string
  | {
      content?: string | null;
      toolCalls?: { id?: string; name: string; arguments?: Record<string, unknown> | string }[];
      usage?: { prompt_tokens?: number; completion_tokens?: number };
      finishReason?: string;
      /** Extra delay for this reply, on top of the server's latency. */
      delayMs?: number;
    }
  | { status: number; headers?: Record<string, string>; error?: { message: string; type?: string; code?: string } };

/** A request the fake server received. */
export interface FakeRequest {
  body: Record<string, unknown> & { model?: string; messages?: unknown[]; stream?: boolean };
  headers: Record<string, string | string[] | undefined>;
}

export interface FakeOpenAIServerOptions {
  /** Replies in order; when they run out, `reply` answers (or the request fails with 500). */
  replies?: FakeReply[];
  reply?: (request: FakeRequest, index: number) => FakeReply | Promise<FakeReply>;
  /** Delay before every answer, in ms. */
  latencyMs?: number;
  /** Port on 127.0.0.1 to listen on. @default 0 (any free port) */
  port?: number;
  /** Model ids `GET /v1/models` lists. @default ['fake-model'] */
  models?: string[];
}

export interface FakeOpenAIServer {
  /** Base URL for clients, e.g. `http://127.0.0.1:41234/v1`. */
  baseURL: string;
  /** Every chat completion request received, in order. */
  requests: FakeRequest[];
  close(): Promise<void>;
}

/**
 * An OpenAI-compatible HTTP server on loopback for tests and benchmarks: `POST /v1/chat/completions`
 * with JSON or SSE streaming answers (content, tool calls, usage), scripted error statuses with
 * headers such as retry-after, and configurable latency. `GET /v1/models` lists its models.
 */
export async function startFakeOpenAIServer(options: FakeOpenAIServerOptions = {}): Promise<FakeOpenAIServer> {
  const requests: FakeRequest[] = [];
  const queue = [...(options.replies ?? [])];
  let counter = 0;

  const server = createServer((incoming, outgoing) => {
    void handle(incoming, outgoing).catch((error: unknown) => {
      if (!outgoing.headersSent) sendJson(outgoing, 500, { error: { message: String(error), type: 'server_error' } });
      else outgoing.destroy();
    });
  });

  async function handle(incoming: IncomingMessage, outgoing: ServerResponse) {
    const path = (incoming.url ?? '').split('?')[0]!.replace(/\/+$/, '');
    if (incoming.method === 'GET' && path.endsWith('/models')) {
      const data = (options.models ?? ['fake-model']).map((id) => ({ id, object: 'model', owned_by: 'rlm' }));
      sendJson(outgoing, 200, { object: 'list', data });
      return;
    }
    if (incoming.method !== 'POST' || !path.endsWith('/chat/completions')) {
      sendJson(outgoing, 404, { error: { message: `no route for ${incoming.method} ${path}`, type: 'invalid_request_error' } });
      return;
    }
    const body = JSON.parse(await readBody(incoming)) as FakeRequest['body'];
    const request: FakeRequest = { body, headers: incoming.headers };
    const index = requests.length;
    requests.push(request);
    const reply = queue.length > 0 ? queue.shift()! : options.reply ? await options.reply(request, index) : undefined;
    const delay = (options.latencyMs ?? 0) + (typeof reply === 'object' && 'delayMs' in reply ? (reply.delayMs ?? 0) : 0);
    if (delay > 0) await sleepUnlessClosed(delay, outgoing);
    if (outgoing.destroyed) return;
    if (reply === undefined) {
      sendJson(outgoing, 500, { error: { message: `fake server: no reply scripted for request #${index + 1}`, type: 'server_error' } });
      return;
    }
    if (typeof reply === 'object' && 'status' in reply) {
      sendJson(outgoing, reply.status, { error: { type: 'error', ...(reply.error ?? { message: `status ${reply.status}` }) } }, reply.headers);
      return;
    }
    const answer = normalize(reply, ++counter);
    const model = String(body.model ?? 'fake-model');
    if (body.stream) streamAnswer(outgoing, answer, model, Boolean((body.stream_options as { include_usage?: boolean })?.include_usage));
    else sendJson(outgoing, 200, completion(answer, model));
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

interface Answer {
  id: string;
  content: string | null;
  toolCalls: { id: string; name: string; arguments: string }[];
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
  finishReason: string;
}

function normalize(reply: Exclude<FakeReply, { status: number }>, counter: number): Answer {
  const value = typeof reply === 'string' ? { content: reply } : reply;
  const toolCalls = (value.toolCalls ?? []).map((call, index) => ({
    id: call.id ?? `call_${counter}_${index}`,
    name: call.name,
    arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments ?? {}),
  }));
  const prompt = value.usage?.prompt_tokens ?? 10;
  const completionTokens = value.usage?.completion_tokens ?? 5;
  return {
    id: `chatcmpl-fake-${counter}`,
    content: value.content ?? (toolCalls.length > 0 ? null : ''),
    toolCalls,
    usage: { prompt_tokens: prompt, completion_tokens: completionTokens, total_tokens: prompt + completionTokens },
    finishReason: value.finishReason ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop'),
  };
}

function completion(answer: Answer, model: string) {
  return {
    id: answer.id,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: answer.content,
          ...(answer.toolCalls.length > 0 && {
            tool_calls: answer.toolCalls.map((call) => ({ id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } })),
          }),
        },
        finish_reason: answer.finishReason,
      },
    ],
    usage: answer.usage,
  };
}

/** Sends the answer as server-sent events in several pieces, as real servers do. */
function streamAnswer(outgoing: ServerResponse, answer: Answer, model: string, includeUsage: boolean) {
  outgoing.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) => ({
    id: answer.id,
    object: 'chat.completion.chunk',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, delta, finish_reason: finishReason }],
  });
  const send = (data: unknown) => outgoing.write(`data: ${JSON.stringify(data)}\n\n`);
  send(chunk({ role: 'assistant', content: '' }));
  if (answer.content) for (const piece of splitInThree(answer.content)) send(chunk({ content: piece }));
  answer.toolCalls.forEach((call, index) => {
    send(chunk({ tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }] }));
    for (const piece of splitInThree(call.arguments)) send(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }));
  });
  send(chunk({}, answer.finishReason));
  if (includeUsage) send({ id: answer.id, object: 'chat.completion.chunk', created: 0, model, choices: [], usage: answer.usage });
  outgoing.end('data: [DONE]\n\n');
}

function splitInThree(text: string): string[] {
  const third = Math.ceil(text.length / 3);
  return [text.slice(0, third), text.slice(third, 2 * third), text.slice(2 * third)].filter((piece) => piece.length > 0);
}

function sendJson(outgoing: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  const text = JSON.stringify(body);
  outgoing.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  outgoing.end(text);
}

function readBody(incoming: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
    incoming.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    incoming.on('error', reject);
  });
}

function sleepUnlessClosed(ms: number, outgoing: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    outgoing.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}
