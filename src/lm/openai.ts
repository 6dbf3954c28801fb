import OpenAI from 'openai';
import { DEFAULTS } from '../defaults.js';
import { ConfigurationError, ModelError } from '../errors.js';
import type { ChatRequest, ChatResponse, LanguageModel, ToolCall } from './types.js';

export interface OpenAIModelOptions {
  /** Any OpenAI-compatible endpoint: OpenAI, vLLM, Ollama, LM Studio, llama.cpp server, OpenRouter. @default process.env.OPENAI_BASE_URL ?? 'https://api.openai.com/v1' */
  baseURL?: string;
  /** @default process.env.OPENAI_API_KEY; optional for a server on this machine */
  apiKey?: string;
  /** Time one request may take, in ms. @default 600000 */
  timeoutMs?: number;
  /** Retries on 408, 409, 429 and 5xx, with backoff that honours retry-after. @default 3 */
  maxRetries?: number;
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
  private readonly client: OpenAI;
  private readonly stream: boolean;
  private readonly extraBody: Record<string, unknown>;

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
    this.client = new OpenAI({
      apiKey: apiKey || 'no-key-needed-on-loopback',
      baseURL,
      timeout: options.timeoutMs ?? DEFAULTS.lm.requestTimeoutMs,
      maxRetries: options.maxRetries ?? DEFAULTS.lm.maxRetries,
    });
    this.stream = options.stream ?? false;
    this.extraBody = options.extraBody ?? {};
  }

  async chat(request: ChatRequest): Promise<ChatResponse> {
    const body = {
      ...this.extraBody,
      model: request.model,
      messages: request.messages as OpenAI.Chat.ChatCompletionMessageParam[],
      ...(request.tools?.length && { tools: request.tools as OpenAI.Chat.ChatCompletionTool[] }),
      ...(request.toolChoice && { tool_choice: request.toolChoice }),
      ...(request.responseFormat && { response_format: request.responseFormat as never }),
    };
    try {
      if (!this.stream) {
        const completion = await this.client.chat.completions.create({ ...body, stream: false }, { signal: request.signal });
        return fromCompletion(completion);
      }
      const stream = await this.client.chat.completions.create(
        { ...body, stream: true, stream_options: { include_usage: true } },
        { signal: request.signal },
      );
      return await fromStream(stream);
    } catch (error) {
      if (request.signal?.aborted) throw request.signal.reason;
      throw toModelError(error, request.model);
    }
  }
}

function fromCompletion(completion: OpenAI.Chat.ChatCompletion): ChatResponse {
  const choice = completion.choices[0];
  if (!choice) throw new ModelError('The model returned no choices', undefined);
  const toolCalls: ToolCall[] = (choice.message.tool_calls ?? []).flatMap((call) =>
    call.type === 'function' ? [{ id: call.id, name: call.function.name, arguments: call.function.arguments ?? '' }] : [],
  );
  return {
    content: choice.message.content ?? null,
    toolCalls,
    usage: { inputTokens: completion.usage?.prompt_tokens ?? 0, outputTokens: completion.usage?.completion_tokens ?? 0 },
    finishReason: choice.finish_reason ?? null,
  };
}

async function fromStream(stream: AsyncIterable<OpenAI.Chat.ChatCompletionChunk>): Promise<ChatResponse> {
  let content: string | null = null;
  let finishReason: string | null = null;
  const usage = { inputTokens: 0, outputTokens: 0 };
  const calls: ToolCall[] = [];
  for await (const chunk of stream) {
    if (chunk.usage) {
      usage.inputTokens = chunk.usage.prompt_tokens ?? 0;
      usage.outputTokens = chunk.usage.completion_tokens ?? 0;
    }
    const choice = chunk.choices[0];
    if (!choice) continue;
    if (choice.delta.content) content = (content ?? '') + choice.delta.content;
    // Tool calls arrive in pieces keyed by index: the first piece has id and name, later ones
    // append to the arguments.
    for (const piece of choice.delta.tool_calls ?? []) {
      const call = (calls[piece.index] ??= { id: '', name: '', arguments: '' });
      if (piece.id) call.id = piece.id;
      if (piece.function?.name) call.name += piece.function.name;
      if (piece.function?.arguments) call.arguments += piece.function.arguments;
    }
    if (choice.finish_reason) finishReason = choice.finish_reason;
  }
  return { content, toolCalls: calls.filter(Boolean), usage, finishReason };
}

function toModelError(error: unknown, model: string): ModelError {
  if (error instanceof ModelError) return error;
  if (error instanceof OpenAI.APIError) {
    const status = error.status;
    const detail = error.message || 'no details';
    const hint =
      status === 401 ? ' Check the API key.' : status === 404 ? ` Check the model name "${model}" and the base URL.` : '';
    return new ModelError(`Model request failed${status ? ` (HTTP ${status})` : ''}: ${detail}.${hint}`, status, { cause: error });
  }
  return new ModelError(`Model request failed: ${(error as Error)?.message ?? String(error)}`, undefined, { cause: error });
}
