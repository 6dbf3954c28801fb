// llm_query(prompt, { schema }) and llm_query_batched(prompts, { schema }): the sub-model's answer
// as a parsed value that matches a JSON Schema model code gave. The schema goes to the server as
// strict structured output when it has a strict form and the server takes it; otherwise it is asked
// for in the prompt. An answer that does not match gets one retry that names its problems.
import { ConfigurationError, HostCallError, ModelError, OutputMismatchError, describeError } from '../errors.js';
import type { ChatMessage, ChatRequest, ChatResponse } from '../lm/types.js';
import { clip } from '../sandbox/shared.js';
import { OutputSchema } from './output-schema.js';
import { message } from './prompts.js';
import { isJsonText } from '../json-text.js';

const REASON_CHARS = 300;

/** The schema model code sent, ready to check answers; one that cannot be used is a catchable TypeError. */
export function querySchemaOf(kind: string, spec: Record<string, unknown>): OutputSchema {
  try {
    return new OutputSchema(spec);
  } catch (error) {
    const reason = error instanceof ConfigurationError && error.cause !== undefined ? describeError(error.cause).message : describeError(error).message;
    throw new HostCallError('TypeError', `${kind}: the schema cannot be used (${clip(reason, REASON_CHARS)}). Send a plain JSON Schema object.`);
  }
}

type Chat = (request: ChatRequest) => Promise<ChatResponse>;

export class StructuredQueries {
  /**
   * Set once the server refused response_format (a 400 naming it) or ignored it (a reply that is
   * not JSON): later sub-calls then ask for the schema in the prompt at once.
   */
  #askInPrompt = false;

  constructor(private readonly chat: Chat) {}

  /** The answer's value, checked against `schema`; throws OutputMismatchError when even the retry does not match. */
  async answer(request: ChatRequest, schema: OutputSchema): Promise<unknown> {
    const first = await this.#ask(request, schema);
    const checked = schema.check(jsonTextOf(first.reply), { nullsAsAbsent: first.structured });
    if ('value' in checked) return checked.value;
    if (first.structured && !isJsonText(jsonTextOf(first.reply))) this.#askInPrompt = true;
    const retry: ChatRequest = {
      ...first.sent,
      messages: [
        ...first.sent.messages,
        { role: 'assistant', content: first.reply },
        { role: 'user', content: message('subcall-schema-retry', { problems: checked.problems.join('\n'), schema: schema.text }) },
      ],
    };
    if (this.#askInPrompt) delete retry.responseFormat;
    const reply = await this.#reply(retry);
    const second = schema.check(jsonTextOf(reply), { nullsAsAbsent: retry.responseFormat !== undefined });
    if ('value' in second) return second.value;
    throw new OutputMismatchError(`the answer does not match the schema, even after a retry: ${clip(second.problems.join('; '), REASON_CHARS * 2)}`);
  }

  /** The first request: with structured output when the schema has a strict form and the server takes it. */
  async #ask(request: ChatRequest, schema: OutputSchema): Promise<{ sent: ChatRequest; reply: string; structured: boolean }> {
    if (!this.#askInPrompt && schema.strictSchema) {
      const sent = { ...request, responseFormat: { type: 'json_schema', json_schema: { name: 'llm_query_answer', schema: schema.strictSchema, strict: true } } };
      try {
        return { sent, reply: await this.#reply(sent), structured: true };
      } catch (error) {
        if (!refusesResponseFormat(error)) throw error;
        this.#askInPrompt = true;
      }
    }
    const sent = { ...request, messages: withInstruction(request.messages, message('subcall-schema', { schema: schema.text })) };
    return { sent, reply: await this.#reply(sent), structured: false };
  }

  async #reply(request: ChatRequest): Promise<string> {
    return (await this.chat(request)).content ?? '';
  }
}

/** A 400 that names response_format: a server without structured output (many local servers). */
function refusesResponseFormat(error: unknown): boolean {
  return error instanceof ModelError && error.status === 400 && /response_format|json_schema/i.test(error.message);
}

/** The prompt with the instruction added to its last user message (a new message would break strict role alternation). */
function withInstruction(messages: ChatMessage[], instruction: string): ChatMessage[] {
  const last = messages.at(-1);
  if (last?.role !== 'user') return [...messages, { role: 'user', content: instruction }];
  const content = typeof last.content === 'string' ? `${last.content}\n\n${instruction}` : [...last.content, { type: 'text' as const, text: instruction }];
  return [...messages.slice(0, -1), { ...last, content }];
}

const FENCED_JSON = /```(?:json)?[ \t]*\n([\s\S]*?)\n?[ \t]*```/i;

/** The JSON in a reply: the reply itself, or the first fenced block of a reply that wraps it in prose. */
function jsonTextOf(reply: string): string {
  const trimmed = reply.trim();
  if (isJsonText(trimmed)) return trimmed;
  const fenced = FENCED_JSON.exec(reply);
  return fenced ? fenced[1]!.trim() : trimmed;
}

