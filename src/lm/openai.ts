import type OpenAI from 'openai';
import { DEFAULTS } from '../defaults.js';
import { ConfigurationError, ModelError } from '../errors.js';
import { ResponseWatch, WATCH_KEY, watchedFetch } from './response-watch.js';
import { retryAfterMs, retryDelayMs, sleep } from './retry.js';
import { readServerSentEvents } from './server-sent-events.js';
import type { ChatRequest, ChatResponse, LanguageModel, ToolCall } from './types.js';

export interface OpenAIModelOptions {
  /** Any OpenAI-compatible endpoint: OpenAI, vLLM, Ollama, LM Studio, llama.cpp server, OpenRouter. @default process.env.OPENAI_BASE_URL ?? 'https://api.openai.com/v1' */
  baseURL?: string;
  /** @default process.env.OPENAI_API_KEY; optional for a server on this machine */
  apiKey?: string;
  /** Time one attempt may take, from the request to the last byte of the response, in ms. @default 600000 */
  timeoutMs?: number;
  /**
   * Longest silence (no bytes), in ms, from the moment the request is sent: waiting for the
   * headers counts, and so does every gap in the body or stream; the attempt is then cut and
   * retried. A JSON (non-streaming) reply arrives only once the model has written all of it, so a
   * model slower than this to produce a whole reply needs a larger value, or `stream: true`.
   * @default 120000
   */
  idleTimeoutMs?: number;
  /**
   * Retries of transient failures: connection errors, 408, 409, 429, 5xx, cut or stalled replies,
   * bodies and SSE lines that are not valid JSON, a 200 carrying an error that is not a client
   * error, and empty `choices`; honouring retry-after. @default 3
   */
  maxRetries?: number;
  /** Longest wait before a retry, in ms. @default 60000 */
  maxRetryDelayMs?: number;
  /** Stream replies over SSE (same result; some servers answer faster this way). @default false */
  stream?: boolean;
  /** Extra body fields sent with every request, e.g. `{ temperature: 0 }`. */
  extraBody?: Record<string, unknown>;
}

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]', '::1', '0.0.0.0']);

/** True for URLs on this machine, where local model servers usually need no key. */
function isLoopbackUrl(url: string): boolean {
  try {
    const { hostname } = new URL(url);
    return LOOPBACK_HOSTS.has(hostname) || hostname.startsWith('127.') || hostname.endsWith('.localhost');
  } catch {
    return false;
  }
}

/**
 * A `LanguageModel` backed by the official `openai` client, for any OpenAI-compatible server.
 *
 * @example
 * const model = new OpenAIModel({ baseURL: 'http://localhost:11434/v1' }); // Ollama, no key needed
 * const reply = await model.chat({ model: 'llama3.1', messages: [{ role: 'user', content: 'Hi' }] });
 */
export class OpenAIModel implements LanguageModel {
  readonly baseURL: string;
  /** The key in use (given or from OPENAI_API_KEY); undefined for a keyless local server. */
  readonly apiKey: string | undefined;
  private client: OpenAI | undefined;
  private readonly settings: { stream: boolean; extraBody: Record<string, unknown>; totalMs: number; idleMs: number; maxRetries: number; maxRetryDelayMs: number };

  constructor(options: OpenAIModelOptions = {}) {
    const baseURL = options.baseURL ?? process.env.OPENAI_BASE_URL ?? 'https://api.openai.com/v1';
    const apiKey = options.apiKey ?? process.env.OPENAI_API_KEY;
    if (!apiKey && !isLoopbackUrl(baseURL)) {
      throw new ConfigurationError(`OPENAI_API_KEY is not set: pass --api-key (or apiKey) or set OPENAI_API_KEY for ${baseURL}`, {
        code: 'missing_api_key',
      });
    }
    this.baseURL = baseURL;
    this.apiKey = apiKey || undefined;
    this.settings = {
      stream: options.stream ?? false,
      extraBody: options.extraBody ?? {},
      totalMs: options.timeoutMs ?? DEFAULTS.lm.requestTimeoutMs,
      idleMs: options.idleTimeoutMs ?? DEFAULTS.lm.idleTimeoutMs,
      maxRetries: options.maxRetries ?? DEFAULTS.lm.maxRetries,
      maxRetryDelayMs: options.maxRetryDelayMs ?? DEFAULTS.lm.maxRetryDelayMs,
    };
  }

  /**
   * The `openai` client, made on the first request: loading the package takes a while, and this way
   * it overlaps the sandbox's start, and programs that never call this model never load it. Retries
   * are done here, not by the client: its waits between retries ignore the abort signal.
   */
  private async openClient(): Promise<OpenAI> {
    if (!this.client) {
      const { default: OpenAIClient } = await import('openai');
      this.client ??= new OpenAIClient({ apiKey: this.apiKey ?? 'no-key-needed-on-loopback', baseURL: this.baseURL, timeout: this.settings.totalMs, maxRetries: 0, fetch: watchedFetch });
    }
    return this.client;
  }

  async chat(request: ChatRequest): Promise<ChatResponse> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.attempt(request);
      } catch (error) {
        if (request.signal?.aborted) throw request.signal.reason;
        const failure = toModelError(error, request.model);
        if (!failure.retriable || attempt >= this.settings.maxRetries) throw finalFailure(failure, attempt + 1);
        const delayMs = retryDelayMs(attempt, failure.retryAfterMs, this.settings.maxRetryDelayMs);
        if (failure.retryAfterMs !== undefined) request.onRetryAfter?.(delayMs);
        await sleep(delayMs, request.signal);
      }
    }
  }

  /**
   * One HTTP request, watched from start to the last byte. The client sends the request and turns
   * error statuses into APIErrors; rlm reads the body itself, to tell a malformed reply from a cut
   * one and a clean end from a cut stream, and so that nothing is printed to the user's stderr
   * (the client logs an SSE line it cannot parse with console.error).
   */
  private async attempt(request: ChatRequest): Promise<ChatResponse> {
    const { stream, extraBody, totalMs, idleMs } = this.settings;
    const watch = new ResponseWatch({ totalMs, idleMs }, request.signal);
    const { signal } = watch;
    const options = { signal, fetchOptions: { [WATCH_KEY]: watch } as OpenAI.RequestOptions['fetchOptions'] };
    const body = {
      ...extraBody,
      model: request.model,
      messages: request.messages as OpenAI.Chat.ChatCompletionMessageParam[],
      ...(request.tools?.length && { tools: request.tools as OpenAI.Chat.ChatCompletionTool[] }),
      ...(request.toolChoice && { tool_choice: request.toolChoice }),
      ...(request.responseFormat && { response_format: request.responseFormat as never }),
    };
    try {
      const client = await this.openClient();
      if (!stream) {
        const response = await client.chat.completions.create({ ...body, stream: false }, options).asResponse();
        return fromCompletion(parseReplyJson(await response.text()));
      }
      const response = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } }, options).asResponse();
      return await fromStream(response.body, watch);
    } catch (error) {
      throw watch.failure ?? (isTransportFailure(error) ? transportFailure(error, watch.headersReceived, this.baseURL) : error);
    } finally {
      watch.dispose();
    }
  }
}

/** The request or response failed below HTTP: no status, nothing the server said. */
function isTransportFailure(error: unknown): boolean {
  return !(error instanceof ModelError) && httpStatus(error) === undefined;
}

function transportFailure(error: unknown, headersReceived: boolean, baseURL: string): ModelError {
  if (headersReceived) {
    return new ModelError("The model's reply stream ended early: the connection closed before the reply was complete.", undefined, { cause: error, retriable: true });
  }
  const { code, message } = rootCause(error);
  const reason = code === 'ECONNREFUSED' ? 'connection refused' : code === 'ENOTFOUND' ? 'host not found' : (code ?? message);
  return new ModelError(`Model request failed: cannot reach ${baseURL} (${reason}). Check that the server is running and the URL is right.`, undefined, {
    cause: error,
    retriable: true,
  });
}

/** The system error code (ECONNREFUSED, ...) down an error's cause chain, and the deepest message. */
function rootCause(error: unknown): { code: string | undefined; message: string } {
  let code: string | undefined;
  let message = 'connection failed';
  for (let current = error, depth = 0; current && depth < 5; current = (current as { cause?: unknown }).cause, depth++) {
    const value = (current as { code?: unknown }).code;
    if (typeof value === 'string' && /^E[A-Z]+$/.test(value)) code ??= value;
    if (typeof (current as Error).message === 'string' && (current as Error).message) message = (current as Error).message;
  }
  return { code, message };
}

/**
 * A reply body that is not JSON (a proxy's HTML error page, a body cut at a clean close) is a
 * transient failure of the server, not an answer and not a network fault.
 */
function parseReplyJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    const start = text.length > 60 ? `${text.slice(0, 60)}...` : text;
    throw new ModelError(`Model request failed: the reply was not valid JSON (it begins: ${JSON.stringify(start)}).`, undefined, { retriable: true });
  }
}

/** A JSON completion, checked: a 200 may still carry an error, no choices, or nothing at all. */
function fromCompletion(served: unknown): ChatResponse {
  const completion = (served ?? {}) as Partial<OpenAI.Chat.ChatCompletion> & { error?: unknown };
  if (completion.error !== undefined && completion.error !== null) throw servedError(completion.error);
  if (!Array.isArray(completion.choices)) throw new ModelError('The model server answered with an error: the reply has no "choices"', undefined, { retriable: true });
  const choice = completion.choices[0];
  if (!choice) throw noChoices();
  const toolCalls: ToolCall[] = (choice.message?.tool_calls ?? []).flatMap((call) =>
    call.type === 'function' ? [{ id: call.id, name: call.function.name, arguments: call.function.arguments ?? '' }] : [],
  );
  return checkedReply({
    content: choice.message?.content ?? null,
    toolCalls,
    usage: { inputTokens: completion.usage?.prompt_tokens ?? 0, outputTokens: completion.usage?.completion_tokens ?? 0 },
    finishReason: choice.finish_reason ?? null,
  });
}

/** Proxies answer `choices: []` when an upstream call failed behind them: worth another try. */
function noChoices(): ModelError {
  return new ModelError('The model server returned no choices.', undefined, { retriable: true });
}

/** Error types and codes that say the request itself is wrong: sending it again cannot help. */
const CLIENT_ERROR = /invalid|authenticat|unauthori[sz]ed|permission|forbidden|not_found|content_(filter|policy)|context_length|unprocessable|bad_request/i;

/**
 * An error object in a 200 body or in an SSE event. Gateways (OpenRouter, LiteLLM) report an
 * upstream's overload or failure this way, so it is retried, unless its type or code names a
 * client error (`invalid_request_error`, a numeric code 400, ...).
 */
function servedError(error: unknown): ModelError {
  const fields = (typeof error === 'object' && error !== null ? error : { message: error }) as { message?: unknown; type?: unknown; code?: unknown; status?: unknown };
  const message = typeof fields.message === 'string' && fields.message ? fields.message : JSON.stringify(error);
  const numeric = [fields.code, fields.status].map(Number).find((value) => Number.isInteger(value) && value >= 400 && value < 600);
  const names = [fields.type, fields.code].filter((value) => typeof value === 'string').join(' ');
  const retriable = numeric !== undefined ? RETRIABLE_STATUS(numeric) : !CLIENT_ERROR.test(names);
  return new ModelError(`The model server answered with an error: ${message}`, numeric, { retriable });
}

/** Where a streamed reply is assembled, chunk by chunk. */
interface StreamedReply {
  content: string | null;
  finishReason: string | null;
  usage: { inputTokens: number; outputTokens: number };
  calls: ToolCall[];
}

/**
 * Assembles a streamed reply. Usage-only chunks (no `choices`) are skipped. A stream that ends
 * without a finish reason (and without the `[DONE]` marker) was cut, and is retried rather than
 * taken as a complete answer; one that delivered its finish reason and then closed cleanly is
 * complete, `[DONE]` or not (the official client accepts it, and some servers omit the marker).
 */
async function fromStream(body: ReadableStream<Uint8Array> | null, watch: ResponseWatch): Promise<ChatResponse> {
  const reply: StreamedReply = { content: null, finishReason: null, usage: { inputTokens: 0, outputTokens: 0 }, calls: [] };
  let sawDone = false;
  for await (const data of body ? readServerSentEvents(body, () => watch.touch()) : []) {
    if (data.startsWith('[DONE]')) {
      sawDone = true;
      break;
    }
    addChunk(reply, parseReplyJson(data) as OpenAI.Chat.ChatCompletionChunk & { error?: unknown });
  }
  const { content, finishReason, usage, calls } = reply;
  if (!sawDone && !finishReason) {
    throw new ModelError("The model's reply stream ended early, without a finish reason or the [DONE] marker.", undefined, { retriable: true });
  }
  if (!finishReason && content === null && calls.length === 0) throw noChoices();
  return checkedReply({ content, toolCalls: calls.filter(Boolean), usage, finishReason });
}

function addChunk(reply: StreamedReply, chunk: OpenAI.Chat.ChatCompletionChunk & { error?: unknown }): void {
  if (chunk?.error !== undefined && chunk.error !== null) throw servedError(chunk.error);
  if (chunk?.usage) {
    reply.usage.inputTokens = chunk.usage.prompt_tokens ?? 0;
    reply.usage.outputTokens = chunk.usage.completion_tokens ?? 0;
  }
  const choice = Array.isArray(chunk?.choices) ? chunk.choices[0] : undefined;
  if (!choice) return;
  if (choice.delta?.content) reply.content = (reply.content ?? '') + choice.delta.content;
  // Tool calls arrive in pieces keyed by index: the first piece has id and name, later ones
  // append to the arguments.
  for (const piece of choice.delta?.tool_calls ?? []) {
    const call = (reply.calls[piece.index] ??= { id: '', name: '', arguments: '' });
    if (piece.id) call.id = piece.id;
    if (piece.function?.name) call.name += piece.function.name;
    if (piece.function?.arguments) call.arguments += piece.function.arguments;
  }
  if (choice.finish_reason) reply.finishReason = choice.finish_reason;
}

/** An empty reply is never an answer, and a reply the server's content filter stopped is not one either. */
function checkedReply(response: ChatResponse): ChatResponse {
  if (response.finishReason === 'content_filter') {
    throw new ModelError("The model server's content filter withheld the reply (finish reason: content_filter): rephrase the query, or use another model.", undefined);
  }
  if (response.toolCalls.length === 0 && !response.content?.trim()) {
    throw new ModelError(`The model returned an empty reply (finish reason: ${response.finishReason ?? 'none'}).`, undefined);
  }
  return response;
}

const RETRIABLE_STATUS = (status: number) => status === 408 || status === 409 || status === 429 || status >= 500;

function toModelError(error: unknown, model: string): ModelError {
  if (error instanceof ModelError) return error;
  const status = httpStatus(error);
  if (status !== undefined) {
    const apiError = error as InstanceType<typeof OpenAI.APIError>;
    const detail = (apiError.message || 'no details').replace(/^\d{3}\s+/, '').replace(/\.+$/, '');
    const hint = status === 401 ? ' Check the API key.' : status === 404 ? ` Check the model name "${model}" and the base URL.` : '';
    return new ModelError(`Model request failed (HTTP ${status}): ${detail}.${hint}`, status, {
      cause: error,
      retriable: RETRIABLE_STATUS(status),
      retryAfterMs: retryAfterMs(apiError.headers),
    });
  }
  // No HTTP status: the connection failed or was cut; trying again may work.
  const message = ((error as Error)?.message ?? String(error)).replace(/\.+$/, '');
  return new ModelError(`Model request failed: ${message}.`, undefined, { cause: error, retriable: true });
}

function finalFailure(failure: ModelError, attempts: number): ModelError {
  if (attempts === 1) return failure;
  const message = failure.message.startsWith('Model request failed')
    ? failure.message.replace(/^Model request failed/, `Model request failed after ${attempts} attempts`)
    : `${failure.message.replace(/\.$/, '')} (${attempts} attempts).`;
  return new ModelError(message, failure.status, { cause: failure.cause ?? failure, retriable: failure.retriable });
}

/** The HTTP status of an error the `openai` client raised for a response (connection errors have none). */
function httpStatus(error: unknown): number | undefined {
  const status = (error as { status?: unknown } | null)?.status;
  return typeof status === 'number' && (error as { headers?: unknown }).headers !== undefined ? status : undefined;
}
