import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { streamSSE } from 'hono/streaming';
import type { ChatCompletions } from '../api/chat-completions.js';
import { ApiError } from '../api/errors.js';
import type { ChatCompletionRequest } from '../api/request.js';
import type { ChatCompletionChunk } from '../api/chat-responses.js';
import { RLM_SERVER_HEADER } from '../lm/discover.js';

export interface AppOptions {
  completions: ChatCompletions;
  /** Model ids for GET /v1/models: the upstream's (an ApiError when it cannot list them). */
  listModels: () => Promise<string[]>;
  /** Clients must send `Authorization: Bearer <token>`. */
  authToken?: string | undefined;
  /** Largest request body, in bytes: room for a 100 MB context by default. */
  maxBodyBytes: number;
  /** Chat completions answered at once; more get 429 with retry-after. */
  maxConcurrentRuns: number;
  /** How often a waiting stream sends a comment line, so proxies keep it open. */
  keepAliveMs: number;
}

/**
 * The OpenAI-compatible HTTP API as a fetch handler (hono): POST /v1/chat/completions (JSON and
 * SSE), GET /v1/models, GET /health. Every error is an OpenAI error object with its status.
 */
export function createApp(options: AppOptions): Hono {
  const app = new Hono();
  let running = 0;

  app.onError((error, c) => {
    const apiError = error instanceof ApiError ? error : new ApiError(500, 'server_error', `Internal error: ${error.message}`);
    return c.json(apiError.toJSON(), apiError.status as 500);
  });
  app.notFound((c) => c.json(new ApiError(404, 'not_found_error', `No route for ${c.req.method} ${c.req.path}.`).toJSON(), 404));

  // Says "this is rlm" on every response, so rlm's own discovery of local servers never picks it.
  app.use('*', async (c, next) => {
    await next();
    c.res.headers.set(RLM_SERVER_HEADER, 'rlm');
  });
  app.get('/health', (c) => c.json({ status: 'ok', running, pausedRuns: options.completions.pausedRuns }));
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
  app.post(
    '/v1/chat/completions',
    bodyLimit({
      maxSize: options.maxBodyBytes,
      onError: () => {
        throw new ApiError(413, 'invalid_request_error', `The request body is larger than ${options.maxBodyBytes} bytes, this server's limit (rlm serve --max-body-mb).`, null, 'request_too_large');
      },
    }),
    async (c) => {
      if (running >= options.maxConcurrentRuns) {
        c.header('retry-after', '1');
        throw new ApiError(429, 'rate_limit_error', `The server is answering ${running} requests, its limit: retry shortly.`, null, 'too_many_requests');
      }
      running++;
      let streaming = false;
      try {
        const body = await readJson(c);
        const signal = c.req.raw.signal;
        if (isStreaming(body)) {
          const chunks = await options.completions.create({ ...(body as ChatCompletionRequest), stream: true }, { signal });
          streaming = true;
          return streamChunks(c, chunks, options.keepAliveMs, () => running--);
        }
        return c.json(await options.completions.create({ ...(body as ChatCompletionRequest), stream: false }, { signal }));
      } finally {
        if (!streaming) running--;
      }
    },
  );
  return app;
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

function isStreaming(body: Record<string, unknown>): boolean {
  return body.stream === true;
}

/**
 * Server-sent events as OpenAI sends them: one `data:` line per chunk, then `data: [DONE]`. While
 * the run works, a comment line every `keepAliveMs` keeps proxies from closing the connection
 * (OpenAI clients ignore comments). An error after the stream has started is sent as an
 * `{ error }` event, which OpenAI clients raise as an APIError.
 */
function streamChunks(c: Context, chunks: AsyncIterable<ChatCompletionChunk>, keepAliveMs: number, onEnd: () => void): Response {
  return streamSSE(c, async (stream) => {
    const iterator = chunks[Symbol.asyncIterator]();
    stream.onAbort(() => void iterator.return?.());
    const keepAlive = setInterval(() => void stream.write(': keep-alive\n\n'), keepAliveMs);
    try {
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
        await stream.writeSSE({ data: JSON.stringify(next.value) });
      }
      await stream.writeSSE({ data: '[DONE]' });
    } catch (error) {
      const apiError = error instanceof ApiError ? error : new ApiError(500, 'server_error', `Internal error: ${(error as Error).message}`);
      await stream.writeSSE({ data: JSON.stringify(apiError.toJSON()) });
    } finally {
      clearInterval(keepAlive);
      onEnd();
    }
  });
}
