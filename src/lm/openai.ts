import type OpenAI from 'openai';
import { DEFAULTS } from '../defaults.js';
import { ConfigurationError, ModelError } from '../errors.js';
import { ResponseWatch, WATCH_KEY, watchedFetch } from './response-watch.js';
import { retryAfterMs, retryDelayMs, sleep } from './retry.js';
import type { ChatRequest, ChatResponse, LanguageModel, ToolCall } from './types.js';

export interface OpenAIModelOptions {
  /** Any OpenAI-compatible endpoint: OpenAI, vLLM, Ollama, LM Studio, llama.cpp server, OpenRouter. @default process.env.OPENAI_BASE_URL ?? 'https://api.openai.com/v1' */
  baseURL?: string;
  /** @default process.env.OPENAI_API_KEY; optional for a server on this machine */
  apiKey?: string;
  /** Time one attempt may take, from the request to the last byte of the response, in ms. @default 600000 */
  timeoutMs?: number;
  /** Longest silence in a response (no bytes), in ms; the attempt is then cut and retried. @default 120000 */
  idleTimeoutMs?: number;
  /** Retries on 408, 409, 429, 5xx, timeouts and cut streams, honouring retry-after. @default 3 */
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
export function isLoopbackUrl(url: string): boolean {
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
        await sleep(retryDelayMs(attempt, failure.retryAfterMs, this.settings.maxRetryDelayMs), request.signal);
      }
    }
  }

  /** One HTTP request, watched from start to the last byte. */
  private async attempt(request: ChatRequest): Promise<ChatResponse> {
    const { stream, extraBody, totalMs, idleMs } = this.settings;
    const watch = new ResponseWatch({ totalMs, idleMs, streaming: stream }, request.signal);
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
      if (!stream) return fromCompletion(await client.chat.completions.create({ ...body, stream: false }, options));
      const chunks = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } }, options);
      return await fromStream(chunks, watch);
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

/** A JSON completion, checked: a 200 may still carry an error, no choices, or nothing at all. */
function fromCompletion(completion: OpenAI.Chat.ChatCompletion): ChatResponse {
  const served = completion as Partial<OpenAI.Chat.ChatCompletion> & { error?: { message?: unknown } };
  if (!Array.isArray(served.choices)) {
    const message = typeof served.error?.message === 'string' ? served.error.message : 'the reply has no "choices"';
    throw new ModelError(`The model server answered with an error: ${message}`, undefined);
  }
  const choice = served.choices[0];
  if (!choice) throw new ModelError('The model server returned no choices.', undefined);
  const toolCalls: ToolCall[] = (choice.message?.tool_calls ?? []).flatMap((call) =>
    call.type === 'function' ? [{ id: call.id, name: call.function.name, arguments: call.function.arguments ?? '' }] : [],
  );
  return checkedReply({
    content: choice.message?.content ?? null,
    toolCalls,
    usage: { inputTokens: served.usage?.prompt_tokens ?? 0, outputTokens: served.usage?.completion_tokens ?? 0 },
    finishReason: choice.finish_reason ?? null,
  });
}

/**
 * Assembles a streamed reply. Usage-only chunks (no `choices`) are skipped; a stream that ends
 * without a finish reason or the `[DONE]` marker was cut, and is retried rather than taken as a
 * complete answer.
 */
async function fromStream(stream: AsyncIterable<OpenAI.Chat.ChatCompletionChunk>, watch: ResponseWatch): Promise<ChatResponse> {
  let content: string | null = null;
  let finishReason: string | null = null;
  const usage = { inputTokens: 0, outputTokens: 0 };
  const calls: ToolCall[] = [];
  for await (const chunk of stream) {
    if (chunk.usage) {
      usage.inputTokens = chunk.usage.prompt_tokens ?? 0;
      usage.outputTokens = chunk.usage.completion_tokens ?? 0;
    }
    const choice = Array.isArray(chunk.choices) ? chunk.choices[0] : undefined;
    if (!choice) continue;
    if (choice.delta?.content) content = (content ?? '') + choice.delta.content;
    // Tool calls arrive in pieces keyed by index: the first piece has id and name, later ones
    // append to the arguments.
    for (const piece of choice.delta?.tool_calls ?? []) {
      const call = (calls[piece.index] ??= { id: '', name: '', arguments: '' });
      if (piece.id) call.id = piece.id;
      if (piece.function?.name) call.name += piece.function.name;
      if (piece.function?.arguments) call.arguments += piece.function.arguments;
    }
    if (choice.finish_reason) finishReason = choice.finish_reason;
  }
  if (!watch.sawDone) {
    const missing = finishReason ? 'the [DONE] marker' : 'a finish reason or the [DONE] marker';
    throw new ModelError(`The model's reply stream ended early, without ${missing}.`, undefined, { retriable: true });
  }
  if (!finishReason && content === null && calls.length === 0) throw new ModelError('The model server returned no choices.', undefined);
  return checkedReply({ content, toolCalls: calls.filter(Boolean), usage, finishReason });
}

/** An empty reply is never an answer. */
function checkedReply(response: ChatResponse): ChatResponse {
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
