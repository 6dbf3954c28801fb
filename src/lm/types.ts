// The project's own model interface. The engine and the sandbox wiring depend on these types
// only; src/lm/openai.ts is the one module that knows the `openai` package.

/** A function the model may call, in OpenAI's function-tool format. */
export interface ToolSpec {
  type: 'function';
  function: {
    name: string;
    description?: string;
    parameters?: Record<string, unknown>;
    strict?: boolean;
  };
}

export type ToolChoice = 'auto' | 'none' | 'required' | { type: 'function'; function: { name: string } };

/** One tool call requested by the model. `arguments` is the raw JSON text the model wrote. */
export interface ToolCall {
  id: string;
  name: string;
  arguments: string;
}

/** Chat messages in OpenAI's format, assistant tool calls and tool results included. */
export type ChatMessage =
  | { role: 'system' | 'developer'; content: string }
  | { role: 'user'; content: string | ContentPart[] }
  | {
      role: 'assistant';
      content: string | null;
      tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
    }
  | { role: 'tool'; tool_call_id: string; content: string };

export type ContentPart = { type: 'text'; text: string } | { type: string; [key: string]: unknown };

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  tools?: ToolSpec[];
  toolChoice?: ToolChoice;
  /** Passed through as OpenAI's `response_format` (e.g. `{ type: 'json_object' }`). */
  responseFormat?: Record<string, unknown>;
  signal?: AbortSignal;
  /**
   * Called when the server asks to wait before the next request (retry-after on a 429 or 503), with
   * the wait in ms, before the model waits and retries: the caller may hold back its other requests
   * to that server too (ModelGateway pauses the model's queue).
   */
  onRetryAfter?: (ms: number) => void;
}

export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
}

export interface ChatResponse {
  /** The text of the reply; null when the model only asked for tool calls. */
  content: string | null;
  toolCalls: ToolCall[];
  usage: TokenUsage;
  finishReason: string | null;
}

/**
 * A chat model. Implement this to use any provider; `OpenAIModel` covers every OpenAI-compatible
 * server and `ScriptedModel` (from `rlm/testing`) serves tests.
 */
export interface LanguageModel {
  chat(request: ChatRequest): Promise<ChatResponse>;
}

/** Converts a tool call to the wire shape of an assistant message's `tool_calls` entry. */
export function toolCallMessage(call: ToolCall) {
  return { id: call.id, type: 'function' as const, function: { name: call.name, arguments: call.arguments } };
}
