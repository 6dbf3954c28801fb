import { z } from 'zod';
import { outputSchemaOf, type OutputSchemaSpec } from '../engine/output-schema.js';
import { ConfigurationError } from '../errors.js';
import type { ToolChoice, ToolSpec } from '../lm/types.js';
import { ApiError } from './errors.js';

export const contentPart = z.object({ type: z.string() }).passthrough();
export const content = z.union([z.string(), z.array(contentPart), z.null()]).optional();
const toolCall = z.object({ id: z.string().min(1), type: z.literal('function').optional(), function: z.object({ name: z.string(), arguments: z.string() }) });

const message = z.discriminatedUnion('role', [
  z.object({ role: z.literal('system'), content, name: z.string().optional() }),
  z.object({ role: z.literal('developer'), content, name: z.string().optional() }),
  z.object({ role: z.literal('user'), content, name: z.string().optional() }),
  z.object({ role: z.literal('assistant'), content, tool_calls: z.array(toolCall).optional(), name: z.string().optional() }),
  z.object({ role: z.literal('tool'), content, tool_call_id: z.string().min(1) }),
]);
export type RequestMessage = z.infer<typeof message>;

const toolSpec = z.object({
  type: z.literal('function'),
  function: z.object({ name: z.string().min(1), description: z.string().optional(), parameters: z.record(z.string(), z.unknown()).optional(), strict: z.boolean().nullish() }),
});

/** OpenAI's structured output: the answer is JSON, matching a schema or just an object. */
const responseFormat = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text') }),
  z.object({ type: z.literal('json_object') }),
  z.object({
    type: z.literal('json_schema'),
    json_schema: z.object({
      name: z.string().regex(/^[\w-]{1,64}$/, 'name must be 1 to 64 letters, digits, _ or -'),
      description: z.string().optional(),
      schema: z.record(z.string(), z.unknown(), 'schema must be a JSON Schema object'),
      strict: z.boolean().nullish(),
    }),
  }),
]);

/** The body of POST /v1/chat/completions, as far as rlm reads it; other fields are ignored. */
const requestSchema = z
  .object({
    model: z.string().min(1),
    messages: z.array(message).min(1, 'messages must hold at least one message'),
    tools: z.array(toolSpec).optional(),
    tool_choice: z.union([z.enum(['auto', 'none', 'required']), z.object({ type: z.literal('function'), function: z.object({ name: z.string() }) })]).optional(),
    stream: z.boolean().nullish(),
    /** A run has one answer: asking for more choices is refused rather than silently ignored. */
    n: z.literal(1, 'rlm answers with one choice: n must be 1 (or left out)').nullish(),
    stream_options: z.object({ include_usage: z.boolean().nullish() }).nullish(),
    response_format: responseFormat.nullish(),
    /** rlm extension: the input to explore, instead of the system messages and earlier turns. */
    rlm_context: z.unknown().optional(),
    /** rlm extension: the sub-model, where the model name cannot carry it. */
    rlm_sub_model: z.string().min(1).optional(),
  })
  .passthrough();
export type ChatCompletionRequest = z.input<typeof requestSchema>;
export type ParsedRequest = z.output<typeof requestSchema>;

/** What a discriminated union accepts, for the field that picks the member. */
const unionMessages: Record<string, string> = {
  role: 'unknown role: use system, developer, user, assistant or tool',
  type: 'unknown type: use text, json_object or json_schema',
};

/** Validates a request body; problems become a 400 naming the field. */
export function parseRequest(body: unknown): ParsedRequest {
  return parseBody(requestSchema, body, unionMessages);
}

/**
 * A body checked against `schema`; the first problem becomes a 400 naming its field, in the words
 * of `unionMessages` (by field name) where a discriminated union did not match.
 */
export function parseBody<Schema extends z.ZodType>(schema: Schema, body: unknown, unionMessages: Record<string, string>): z.output<Schema> {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const param = issue.path.join('.') || null;
  const message = issue.code === 'invalid_union' ? (unionMessages[String(issue.path.at(-1))] ?? issue.message) : issue.message;
  throw new ApiError(400, 'invalid_request_error', `Invalid request: ${param ? `${param}: ` : ''}${message}`, param);
}

/** Content part types that hold text: chat's `text`, the Responses API's `input_text` and `output_text`. */
const TEXT_PARTS = new Set(['text', 'input_text', 'output_text']);

/** The text of a message's content: a string, text parts joined, or empty. */
export function contentText(value: RequestMessage['content']): string {
  if (typeof value === 'string') return value;
  if (!Array.isArray(value)) return '';
  return value.map((part) => (TEXT_PARTS.has(part.type) && typeof part.text === 'string' ? part.text : '')).join('');
}

/** Earlier turns as a run's context: one turn's text, or the turns themselves. */
export function contextOfTurns(turns: { role: string; content: string }[]): unknown {
  return turns.length === 1 ? turns[0]!.content : turns;
}

/** Tool results at the end of the conversation (after the last assistant message), by call id. */
export function trailingToolResults(messages: RequestMessage[]): Map<string, string> {
  const results = new Map<string, string>();
  for (let index = messages.length - 1; index >= 0 && messages[index]!.role === 'tool'; index--) {
    const result = messages[index] as Extract<RequestMessage, { role: 'tool' }>;
    results.set(result.tool_call_id, contentText(result.content));
  }
  return results;
}

/**
 * A new run's question and input: the question is the last user message; the input is the
 * `rlm_context` extension when given, else everything before the question (one message's text,
 * or the messages themselves).
 */
export function questionAndContext(request: ParsedRequest): { query: string; context: unknown } {
  const last = request.messages.at(-1)!;
  if (last.role !== 'user') {
    throw new ApiError(400, 'invalid_request_error', `Invalid request: the last message must be the user's question (or tool results for a paused run), got role "${last.role}"`, 'messages');
  }
  const query = contentText(last.content);
  if (!query.trim()) throw new ApiError(400, 'invalid_request_error', 'Invalid request: the last user message is empty', 'messages');
  if (request.rlm_context !== undefined) return { query, context: request.rlm_context };
  return { query, context: contextOfTurns(request.messages.slice(0, -1).map((entry) => ({ role: entry.role, content: contentText(entry.content) }))) };
}

export function callerToolsOf(request: ParsedRequest): { specs: ToolSpec[]; toolChoice: ToolChoice | undefined } | undefined {
  if (!request.tools?.length) return undefined;
  return { specs: request.tools as ToolSpec[], toolChoice: request.tool_choice as ToolChoice | undefined };
}

/** The schema the run's answer must match, from `response_format` (see outputOfFormat). */
export function outputOf(request: ParsedRequest): OutputSchemaSpec | undefined {
  const format = request.response_format;
  const schema = format?.type === 'json_schema' ? format.json_schema.schema : undefined;
  return outputOfFormat(format && { type: format.type, schema }, 'response_format.json_schema.schema');
}

/**
 * The schema a run's answer must match, from a requested format: json_schema gives its schema,
 * json_object any object. `strict` needs no handling: every answer is checked. A schema the run
 * cannot check is the request's problem: a 400 naming `schemaParam`.
 */
export function outputOfFormat(format: { type: string; schema?: Record<string, unknown> | undefined } | null | undefined, schemaParam: string): OutputSchemaSpec | undefined {
  if (format?.type === 'json_object') return { type: 'object' };
  if (format?.type !== 'json_schema' || !format.schema) return undefined;
  try {
    outputSchemaOf(format.schema);
  } catch (error) {
    if (!(error instanceof ConfigurationError)) throw error;
    throw new ApiError(400, 'invalid_request_error', `Invalid request: ${schemaParam}: ${error.message}`, schemaParam);
  }
  return format.schema;
}
