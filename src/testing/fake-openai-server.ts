import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chatTemplateProblem } from './chat-template.js';

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
  | { status: number; headers?: Record<string, string>; error?: { message: string; type?: string; code?: string } }
  | {
      fault: FakeFault;
      content?: string;
      delayMs?: number;
      /** For `error-body`: the error object sent (default: a `server_error` whose message is `content`). */
      error?: { message: string; type?: string; code?: string | number };
    };

/**
 * Ways a misbehaving server answers, in JSON or SSE as the request asks:
 * - `stream-cut`: part of the reply, then the connection closes (no finish reason, no [DONE]; in
 *   JSON: half of the body);
 * - `stream-cut-mid-event`: the connection closes in the middle of an SSE event;
 * - `stream-closed-early`: part of the reply, then a clean close (no finish reason, no [DONE]);
 * - `stream-no-done`: a complete reply with its finish reason, then a clean close without [DONE];
 * - `empty-choices`: `choices: []` (in SSE: every chunk);
 * - `no-choices`: a 200 JSON body without `choices`;
 * - `error-body`: a 200 JSON body `{ error: { message } }` (the message is `content`; in SSE: an
 *   event carrying that error object, as gateways send one mid-stream);
 * - `malformed-json`: a 200 JSON body cut short at a clean close (in SSE: one garbled data line
 *   among good ones);
 * - `null-content`: `content: null` and no tool calls;
 * - `usage-chunks`: a normal reply with extra SSE chunks that have no `choices` field;
 * - `stall-after-headers`: headers, then nothing until the client gives up;
 * - `silent`: nothing at all until the client gives up;
 * - `drop`: the connection is destroyed at once.
 */
export type FakeFault =
  | 'stream-cut'
  | 'stream-cut-mid-event'
  | 'stream-closed-early'
  | 'stream-no-done'
  | 'empty-choices'
  | 'no-choices'
  | 'error-body'
  | 'malformed-json'
  | 'null-content'
  | 'usage-chunks'
  | 'stall-after-headers'
  | 'silent'
  | 'drop';

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
  /**
   * Answer 400, as servers applying a strict chat template do (Mistral, Gemma, ...), to a request
   * whose roles do not alternate user/assistant after an optional system message (tool-call turns
   * aside) or that does not end with the user's turn. The request is recorded, and takes no reply.
   * @default false
   */
  requireAlternation?: boolean;
  /**
   * Share of chat completion requests (0 to 1) answered with a fault drawn from `faults` instead of
   * their reply. The fault is drawn before the scripted reply is used, and a faulted request does
   * not use one up. @default 0
   */
  faultRate?: number;
  /** The faults drawn from, each as likely. @default DEFAULT_FAULT_MIX */
  faults?: FakeReply[];
  /** Seed of the draws: the same seed and the same requests give the same faults. @default 1 */
  seed?: number;
}

/**
 * An assortment of what real servers and proxies answer now and then: 500, 429 with retry-after 0,
 * a dropped connection, a malformed body, a cut reply, a reply that stalls after its headers, no
 * answer at all, a 200 carrying an error, and a 200 without choices.
 */
export const DEFAULT_FAULT_MIX: readonly FakeReply[] = [
  { status: 500, error: { message: 'internal error', type: 'server_error' } },
  { status: 429, headers: { 'retry-after': '0' }, error: { message: 'rate limited', type: 'rate_limit_error' } },
  { fault: 'drop' },
  { fault: 'malformed-json' },
  { fault: 'stream-cut' },
  { fault: 'stall-after-headers' },
  { fault: 'silent' },
  { fault: 'error-body' },
  { fault: 'empty-choices' },
];

export interface FakeOpenAIServer {
  /** Base URL for clients, e.g. `http://127.0.0.1:41234/v1`. */
  baseURL: string;
  /** Every chat completion request received, in order (faulted ones included). */
  requests: FakeRequest[];
  /** Faults drawn by `faultRate`, counted by kind (`fault` name, or `status 500`, ...). */
  faultsInjected: Record<string, number>;
  close(): Promise<void>;
}

/**
 * An OpenAI-compatible HTTP server on loopback for tests and benchmarks: `POST /v1/chat/completions`
 * with JSON or SSE streaming answers (content, tool calls, usage), scripted error statuses with
 * headers such as retry-after, and configurable latency. `GET /v1/models` lists its models.
 */
export async function startFakeOpenAIServer(options: FakeOpenAIServerOptions = {}): Promise<FakeOpenAIServer> {
  const requests: FakeRequest[] = [];
  const faultsInjected: Record<string, number> = {};
  const handle = requestHandler({ options, requests, drawFault: faultDrawer(options, faultsInjected) });
  const server = createServer((incoming, outgoing) => {
    void handle(incoming, outgoing).catch((error: unknown) => {
      if (!outgoing.headersSent) sendJson(outgoing, 500, { error: { message: String(error), type: 'server_error' } });
      else outgoing.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    faultsInjected,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Answers one HTTP request: the model list, or a chat completion from the script (or a fault). */
function requestHandler({ options, requests, drawFault }: { options: FakeOpenAIServerOptions; requests: FakeRequest[]; drawFault: () => FakeReply | undefined }) {
  const queue = [...(options.replies ?? [])];
  let counter = 0;
  return async function handle(incoming: IncomingMessage, outgoing: ServerResponse) {
    const path = (incoming.url ?? '').split('?')[0]!.replace(/\/+$/, '');
    if (incoming.method === 'GET' && path.endsWith('/models')) {
      const data = (options.models ?? ['fake-model']).map((id) => ({ id, object: 'model', owned_by: 'fake' }));
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
    const templateProblem = options.requireAlternation ? chatTemplateProblem(body.messages) : undefined;
    if (templateProblem) {
      const message = `Conversation roles must alternate user/assistant/user/assistant/... (${templateProblem})`;
      sendJson(outgoing, 400, { error: { message, type: 'BadRequestError', code: 400 } });
      return;
    }
    const reply = drawFault() ?? (queue.length > 0 ? queue.shift()! : options.reply ? await options.reply(request, index) : undefined);
    const delay = (options.latencyMs ?? 0) + (typeof reply === 'object' && 'delayMs' in reply ? (reply.delayMs ?? 0) : 0);
    if (delay > 0) await sleepUnlessClosed(delay, outgoing);
    if (outgoing.destroyed) return;
    if (reply === undefined) {
      sendJson(outgoing, 500, { error: { message: `fake server: no reply scripted for request #${index + 1}`, type: 'server_error' } });
      return;
    }
    answer(outgoing, reply, body, ++counter);
  };
}

/** Draws, per request, whether it fails and how; counts what it drew. */
function faultDrawer(options: FakeOpenAIServerOptions, counts: Record<string, number>): () => FakeReply | undefined {
  const rate = options.faultRate ?? 0;
  const faults = options.faults ?? DEFAULT_FAULT_MIX;
  if (!(rate >= 0 && rate <= 1)) throw new RangeError(`faultRate must be between 0 and 1, got ${rate}`);
  if (rate > 0 && faults.length === 0) throw new RangeError('faults must name at least one fault when faultRate is above 0');
  const random = seededRandom(options.seed ?? 1);
  return () => {
    if (rate === 0 || random() >= rate) return undefined;
    const fault = faults[Math.floor(random() * faults.length)]!;
    const kind = typeof fault === 'object' && 'fault' in fault ? fault.fault : typeof fault === 'object' && 'status' in fault ? `status ${fault.status}` : 'reply';
    counts[kind] = (counts[kind] ?? 0) + 1;
    return fault;
  };
}

/** mulberry32: a small, fast generator whose sequence a seed fixes. */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let value = state;
    value = Math.imul(value ^ (value >>> 15), value | 1);
    value ^= value + Math.imul(value ^ (value >>> 7), value | 61);
    return ((value ^ (value >>> 14)) >>> 0) / 4294967296;
  };
}

function answer(outgoing: ServerResponse, reply: FakeReply, body: FakeRequest['body'], counter: number): void {
  const model = String(body.model ?? 'fake-model');
  if (typeof reply === 'object' && 'fault' in reply) return answerWithFault(outgoing, reply, model, Boolean(body.stream), counter);
  if (typeof reply === 'object' && 'status' in reply) {
    return sendJson(outgoing, reply.status, { error: { type: 'error', ...(reply.error ?? { message: `status ${reply.status}` }) } }, reply.headers);
  }
  const normalized = normalize(reply, counter);
  if (body.stream) streamAnswer(outgoing, normalized, model, Boolean((body.stream_options as { include_usage?: boolean })?.include_usage));
  else sendJson(outgoing, 200, completion(normalized, model));
}

interface Answer {
  id: string;
  content: string | null;
  toolCalls: { id: string; name: string; arguments: string }[];
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
  finishReason: string;
}

function normalize(reply: Exclude<FakeReply, { status: number } | { fault: FakeFault }>, counter: number): Answer {
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

function chunkOf(answer: Answer, model: string, delta: Record<string, unknown>, finishReason: string | null = null) {
  return { id: answer.id, object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model, choices: [{ index: 0, delta, finish_reason: finishReason }] };
}

function startStream(outgoing: ServerResponse): (data: unknown) => void {
  outgoing.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  return (data) => outgoing.write(`data: ${JSON.stringify(data)}\n\n`);
}

/** Sends the answer as server-sent events in several pieces, as real servers do. */
function streamAnswer(outgoing: ServerResponse, answer: Answer, model: string, includeUsage: boolean) {
  const send = startStream(outgoing);
  const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) => chunkOf(answer, model, delta, finishReason);
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

function answerWithFault(outgoing: ServerResponse, reply: Extract<FakeReply, { fault: FakeFault }>, model: string, streaming: boolean, counter: number) {
  const answer = normalize({ content: reply.content ?? 'partial answer' }, counter);
  const servedError = reply.error ?? { message: reply.content ?? 'the model is overloaded', type: 'server_error' };
  switch (reply.fault) {
    case 'drop':
      outgoing.destroy();
      return;
    case 'silent':
      return; // the client's timeout ends it; close() cuts the connection
    case 'stall-after-headers':
      outgoing.writeHead(200, { 'content-type': streaming ? 'text/event-stream' : 'application/json' });
      outgoing.flushHeaders();
      return;
    case 'no-choices':
      return sendJson(outgoing, 200, { id: answer.id, object: 'chat.completion', model, usage: answer.usage });
  }
  if (streaming) return streamFault(outgoing, reply.fault, answer, model, servedError);
  const body = completion(answer, model);
  const text = JSON.stringify(body);
  switch (reply.fault) {
    case 'error-body':
      return sendJson(outgoing, 200, { error: servedError });
    case 'malformed-json':
      return sendText(outgoing, 200, text.slice(0, Math.ceil(text.length / 2)));
    case 'stream-cut':
      outgoing.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      outgoing.write(text.slice(0, Math.ceil(text.length / 2)));
      return cutOnceSent(outgoing);
  }
  if (reply.fault === 'empty-choices') body.choices = [];
  if (reply.fault === 'null-content') body.choices[0]!.message.content = null;
  return sendJson(outgoing, 200, body);
}

function streamFault(outgoing: ServerResponse, fault: FakeFault, answer: Answer, model: string, servedError: object) {
  const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) => chunkOf(answer, model, delta, finishReason);
  const send = startStream(outgoing);
  switch (fault) {
    case 'stream-cut':
      send(chunk({ role: 'assistant', content: '' }));
      send(chunk({ content: answer.content!.slice(0, Math.ceil(answer.content!.length / 2)) }));
      return cutOnceSent(outgoing);
    case 'stream-cut-mid-event':
      send(chunk({ role: 'assistant', content: '' }));
      outgoing.write(`data: ${JSON.stringify(chunk({ content: answer.content })).slice(0, 20)}`);
      return cutOnceSent(outgoing);
    case 'stream-closed-early':
      send(chunk({ role: 'assistant', content: '' }));
      send(chunk({ content: answer.content!.slice(0, Math.ceil(answer.content!.length / 2)) }));
      return void outgoing.end();
    case 'stream-no-done':
      send(chunk({ content: answer.content }));
      send(chunk({}, 'stop'));
      return void outgoing.end();
    case 'empty-choices':
      send({ ...chunk({}), choices: [] });
      return void outgoing.end('data: [DONE]\n\n');
    case 'null-content':
      send(chunk({ role: 'assistant' }));
      send(chunk({}, 'stop'));
      return void outgoing.end('data: [DONE]\n\n');
    case 'error-body':
      send(chunk({ role: 'assistant', content: '' }));
      send({ error: servedError });
      return void outgoing.end('data: [DONE]\n\n');
    case 'malformed-json':
      send(chunk({ role: 'assistant', content: '' }));
      outgoing.write(`data: ${JSON.stringify(chunk({ content: answer.content })).slice(0, 25)}\n\n`);
      send(chunk({}, 'stop'));
      return void outgoing.end('data: [DONE]\n\n');
    case 'usage-chunks': {
      const { choices: _choices, ...usageOnly } = { ...chunk({}), usage: answer.usage };
      send(usageOnly);
      send(chunk({ role: 'assistant', content: answer.content }));
      send(usageOnly);
      send(chunk({}, 'stop'));
      return void outgoing.end('data: [DONE]\n\n');
    }
  }
}

/** Closes the connection abruptly, but only after what was written has left, as a dying server does. */
function cutOnceSent(outgoing: ServerResponse): void {
  outgoing.write('', () => outgoing.destroy());
}

function splitInThree(text: string): string[] {
  const third = Math.ceil(text.length / 3);
  return [text.slice(0, third), text.slice(third, 2 * third), text.slice(2 * third)].filter((piece) => piece.length > 0);
}

function sendJson(outgoing: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  sendText(outgoing, status, JSON.stringify(body), headers);
}

/** A body sent as JSON, whatever it holds (a fault may send a broken one). */
function sendText(outgoing: ServerResponse, status: number, text: string, headers: Record<string, string> = {}) {
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
