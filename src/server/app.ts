import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { streamSSE } from 'hono/streaming';
import type { ChatCompletions } from '../api/chat-completions.js';
import { ApiError } from '../api/errors.js';
import type { ChatCompletionRequest } from '../api/request.js';
import type { ResponseEvent } from '../api/response-objects.js';
import type { Responses } from '../api/responses.js';
import type { ResponseCreateRequest } from '../api/responses-request.js';
import { RLM_SERVER_HEADER } from '../lm/discover.js';

export interface AppOptions {
  completions: ChatCompletions;
  responses: Responses;
  /** Model ids for GET /v1/models: the upstream's (an ApiError when it cannot list them). */
  listModels: () => Promise<string[]>;
  /** Clients must send `Authorization: Bearer <token>`. */
  authToken?: string | undefined;
  /** Largest request body, in bytes: room for a 100 MB context by default. */
  maxBodyBytes: number;
  /** Runs answered at once (background ones included); more get 429 with retry-after. */
  maxConcurrentRuns: number;
  /** How often a waiting stream sends a comment line, so proxies keep it open. */
  keepAliveMs: number;
}

/**
 * The OpenAI-compatible HTTP API as a fetch handler (hono): POST /v1/chat/completions and
 * POST /v1/responses (JSON and SSE), GET /v1/responses/{id} (JSON, or SSE with ?stream=true),
 * POST /v1/responses/{id}/cancel, GET /v1/models, GET /health. Every error is an OpenAI error
 * object with its status.
 */
export function createApp(options: AppOptions): Hono {
  const app = new Hono();
  const slots = new RunSlots(options.maxConcurrentRuns);

  app.onError((error, c) => {
    const apiError = asApiError(error);
    // The only 429 is a full server (RunSlots): a slot frees as soon as any run ends.
    if (apiError.status === 429) c.header('retry-after', '1');
    return c.json(apiError.toJSON(), apiError.status as 500);
  });
  app.notFound((c) => c.json(new ApiError(404, 'not_found_error', `No route for ${c.req.method} ${c.req.path}.`).toJSON(), 404));

  // Says "this is rlm" on every response, so rlm's own discovery of local servers never picks it.
  app.use('*', async (c, next) => {
    await next();
    c.res.headers.set(RLM_SERVER_HEADER, 'rlm');
  });
  app.get('/health', (c) => c.json({ status: 'ok', running: slots.taken, pausedRuns: options.completions.pausedRuns + options.responses.pausedRuns }));
  app.use('/v1/*', async (c, next) => {
    if (options.authToken && c.req.header('authorization') !== `Bearer ${options.authToken}`) {
      throw new ApiError(401, 'authentication_error', 'Missing or wrong API key: send the server\'s token as "Authorization: Bearer <token>".', null, 'invalid_api_key');
    }
    await next();
  });
  app.get('/v1/models', async (c) => {
    const ids = await options.listModels();
    return c.json({ object: 'list', data: ids.map((id) => ({ id, object: 'model', created: 0, owned_by: 'rlm' })) });
  });
  const limitBody = bodyLimit({
    maxSize: options.maxBodyBytes,
    onError: () => {
      throw new ApiError(413, 'invalid_request_error', `The request body is larger than ${options.maxBodyBytes} bytes, this server's limit (rlm serve --max-body-mb).`, null, 'request_too_large');
    },
  });
  app.post('/v1/chat/completions', limitBody, (c) => answerChatCompletion(c, options, slots));
  app.post('/v1/responses', limitBody, (c) => answerResponse(c, options, slots));
  app.get('/v1/responses/:id', (c) => {
    const id = c.req.param('id');
    if (c.req.query('stream') !== 'true') return c.json(options.responses.retrieve(id));
    const events = options.responses.stream(id, startingAfterOf(c.req.query('starting_after')), c.req.raw.signal);
    return streamEvents(c, mapEvents(events, responseMessage), { keepAliveMs: options.keepAliveMs, errorMessage: responseErrorMessage });
  });
  app.post('/v1/responses/:id/cancel', async (c) => c.json(await options.responses.cancel(c.req.param('id'))));
  return app;
}

async function answerChatCompletion(c: Context, options: AppOptions, slots: RunSlots): Promise<Response> {
  const release = slots.take();
  let streaming = false;
  try {
    const body = (await readJson(c)) as ChatCompletionRequest;
    const signal = c.req.raw.signal;
    if (body.stream === true) {
      const chunks = await options.completions.create({ ...body, stream: true }, { signal });
      streaming = true;
      const messages = mapEvents(chunks, (chunk) => ({ data: JSON.stringify(chunk) }));
      return streamEvents(c, messages, { keepAliveMs: options.keepAliveMs, onEnd: release, done: '[DONE]', errorMessage: (error) => ({ data: JSON.stringify(error.toJSON()) }) });
    }
    return c.json(await options.completions.create({ ...body, stream: false }, { signal }));
  } finally {
    if (!streaming) release();
  }
}

/** A background response holds its run slot until its run ends, not just for its request. */
async function answerResponse(c: Context, options: AppOptions, slots: RunSlots): Promise<Response> {
  const release = slots.take();
  // Once the run is under way, whoever follows it gives the slot back: the run itself in the background, else the stream.
  let handedOn = false;
  try {
    const body = (await readJson(c)) as ResponseCreateRequest;
    const background = body.background === true;
    const created = await options.responses.create(body, { signal: c.req.raw.signal, onBackgroundEnd: release });
    handedOn = background;
    if (!isEventStream(created)) return c.json(created);
    handedOn = true;
    return streamEvents(c, mapEvents(created, responseMessage), { keepAliveMs: options.keepAliveMs, errorMessage: responseErrorMessage, onEnd: background ? undefined : release });
  } finally {
    if (!handedOn) release();
  }
}

/** The body as a JSON object: an array or a scalar would otherwise be spread into one. */
async function readJson(c: Context): Promise<Record<string, unknown>> {
  let body: unknown;
  try {
    body = await c.req.json();
  } catch {
    throw new ApiError(400, 'invalid_request_error', 'The request body is not valid JSON.', null, 'invalid_json');
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new ApiError(400, 'invalid_request_error', `The body must be a JSON object ({ "model": ..., "messages": [...] }), not ${Array.isArray(body) ? 'an array' : body === null ? 'null' : `a ${typeof body}`}.`, null, 'invalid_json');
  }
  return body as Record<string, unknown>;
}

function isEventStream(value: object): value is AsyncIterable<ResponseEvent> {
  return Symbol.asyncIterator in value;
}

function startingAfterOf(query: string | undefined): number | undefined {
  if (query === undefined) return undefined;
  const number = Number(query);
  if (!Number.isInteger(number) || number < -1) {
    throw new ApiError(400, 'invalid_request_error', `Invalid request: starting_after must be an event's sequence_number (an integer from 0), got "${query}".`, 'starting_after');
  }
  return number;
}

function asApiError(error: unknown): ApiError {
  return error instanceof ApiError ? error : new ApiError(500, 'server_error', `Internal error: ${(error as Error).message}`);
}

/** Responses API events name their type in the SSE `event:` line too, as OpenAI sends them. */
function responseMessage(event: ResponseEvent): SseMessage {
  return { event: event.type, data: JSON.stringify(event) };
}

/** An error after a Responses stream has started: OpenAI's `error` event. */
function responseErrorMessage(error: ApiError): SseMessage {
  return { event: 'error', data: JSON.stringify({ type: 'error', code: error.code, message: error.message, param: error.param }) };
}

interface SseMessage {
  event?: string;
  data: string;
}

async function* mapEvents<Item>(items: AsyncIterable<Item>, toMessage: (item: Item) => SseMessage): AsyncGenerator<SseMessage> {
  for await (const item of items) yield toMessage(item);
}

interface StreamOptions {
  keepAliveMs: number;
  /** Called once the stream has ended, however it ended. */
  onEnd?: (() => void) | undefined;
  /** The last message of a stream that ends well (chat completions' `[DONE]`). */
  done?: string;
  /** The message that ends a stream that failed after it started. */
  errorMessage: (error: ApiError) => SseMessage;
}

/**
 * Server-sent events as OpenAI sends them. While the run works, a comment line every
 * `keepAliveMs` keeps proxies from closing the connection (OpenAI clients ignore comments). An
 * error after the stream has started (the status, 200, is sent) ends it with `errorMessage`,
 * which OpenAI clients raise or report. A client that goes away stops the iteration: what that
 * means for the run is up to whoever made `messages`.
 */
function streamEvents(c: Context, messages: AsyncIterable<SseMessage>, options: StreamOptions): Response {
  return streamSSE(c, async (stream) => {
    const iterator = messages[Symbol.asyncIterator]();
    stream.onAbort(() => void iterator.return?.());
    const keepAlive = setInterval(() => void stream.write(': keep-alive\n\n'), options.keepAliveMs);
    try {
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) await stream.writeSSE(next.value);
      if (options.done) await stream.writeSSE({ data: options.done });
    } catch (error) {
      await stream.writeSSE(options.errorMessage(asApiError(error)));
    } finally {
      clearInterval(keepAlive);
      options.onEnd?.();
    }
  });
}

/** The cap on runs answered at once: past it, a 429 with retry-after. */
class RunSlots {
  taken = 0;

  constructor(private readonly max: number) {}

  /** A slot, and the function that gives it back (once, however often it is called). */
  take(): () => void {
    if (this.taken >= this.max) {
      throw new ApiError(429, 'rate_limit_error', `The server is answering ${this.taken} requests, its limit: retry shortly.`, null, 'too_many_requests');
    }
    this.taken++;
    let given = false;
    return () => {
      if (!given) this.taken--;
      given = true;
    };
  }
}
