import type { ChatRequest, ChatResponse, LanguageModel, TokenUsage } from '../lm/types.js';

/** A scripted tool call; `arguments` may be an object (sent as JSON) or raw text. */
export interface ScriptedToolCall {
  id?: string;
  name: string;
  arguments?: Record<string, unknown> | string;
}

/**
 * One scripted reply: text, a reply object, or an Error to throw. Usage defaults to an estimate of
 * four characters per token, so budgets and counters see realistic numbers.
 */
export type ScriptedReply =
  | string
  | Error
  | { content?: string | null; toolCalls?: ScriptedToolCall[]; usage?: Partial<TokenUsage>; finishReason?: string; delayMs?: number };

export type ReplyFunction = (request: ChatRequest, index: number) => ScriptedReply | Promise<ScriptedReply>;

/**
 * A `LanguageModel` for tests: answers from a list of replies (or a function), records every
 * request, and fails loudly on a call the script did not expect.
 *
 * @example
 * const model = new ScriptedModel(['```repl\nFINAL("42")\n```']);
 * const rlm = new RLM({ model: 'root', languageModel: model });
 */
export class ScriptedModel implements LanguageModel {
  /** Every request received, in order (without its AbortSignal). */
  readonly calls: Omit<ChatRequest, 'signal'>[] = [];
  private readonly script: ScriptedReply[] | ReplyFunction;

  constructor(script: ScriptedReply[] | ReplyFunction) {
    this.script = Array.isArray(script) ? [...script] : script;
  }

  /** Replies not used yet (for a list script). */
  get remaining(): number {
    return Array.isArray(this.script) ? this.script.length - this.calls.length : Number.POSITIVE_INFINITY;
  }

  async chat(request: ChatRequest): Promise<ChatResponse> {
    const { signal, ...recorded } = request;
    signal?.throwIfAborted();
    const index = this.calls.length;
    this.calls.push(recorded);
    let reply: ScriptedReply;
    if (Array.isArray(this.script)) {
      if (index >= this.script.length) {
        throw new Error(
          `ScriptedModel: unexpected call #${index + 1} (the script has ${this.script.length} replies). Last message: ${describeLast(request)}`,
        );
      }
      reply = this.script[index]!;
    } else {
      reply = await this.script(request, index);
    }
    if (reply instanceof Error) throw reply;
    const normalized = typeof reply === 'string' ? { content: reply } : reply;
    if (normalized.delayMs) await sleep(normalized.delayMs, signal);
    const toolCalls = (normalized.toolCalls ?? []).map((call, position) => ({
      id: call.id ?? `call_${index + 1}_${position + 1}`,
      name: call.name,
      arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments ?? {}),
    }));
    const content = normalized.content ?? (toolCalls.length > 0 ? null : '');
    return {
      content,
      toolCalls,
      usage: {
        inputTokens: normalized.usage?.inputTokens ?? reportedTokens(JSON.stringify(request.messages)),
        outputTokens: normalized.usage?.outputTokens ?? reportedTokens((content ?? '') + JSON.stringify(toolCalls)),
      },
      finishReason: normalized.finishReason ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop'),
    };
  }
}

/**
 * The usage a real server would report: about four characters a token, as common tokenizers count
 * English. Not an estimate that must err high (that is src/lm/token-estimate.ts).
 */
function reportedTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

function describeLast(request: ChatRequest): string {
  const last = request.messages[request.messages.length - 1];
  const content = last && 'content' in last ? JSON.stringify(last.content) : '(none)';
  return content.length > 200 ? `${content.slice(0, 200)}...` : content;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}
