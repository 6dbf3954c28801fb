import { z } from 'zod';
import type { OutputSchemaSpec } from '../engine/output-schema.js';
import type { ToolChoice, ToolSpec } from '../lm/types.js';
import { ApiError } from './errors.js';
import { content, contentPart, contentText, contextOfTurns, outputOfFormat, parseBody } from './request.js';

const messageItem = z.object({ type: z.literal('message'), role: z.enum(['user', 'assistant', 'system', 'developer'], 'unknown role: use user, assistant, system or developer'), content }).passthrough();
const functionCallItem = z.object({ type: z.literal('function_call'), call_id: z.string().min(1), name: z.string(), arguments: z.string() }).passthrough();
const functionCallOutputItem = z.object({ type: z.literal('function_call_output'), call_id: z.string().min(1), output: z.union([z.string(), z.array(contentPart)]) }).passthrough();
/** A reasoning model's item a client sends back as it got it: nothing in it is for the run. */
const reasoningItem = z.object({ type: z.literal('reasoning') }).passthrough();

/** A message may leave out `type` (the easy input form `{ role, content }`). */
const inputItem = z.preprocess(
  (item) => (item !== null && typeof item === 'object' && !('type' in item) && 'role' in item ? { ...item, type: 'message' } : item),
  z.discriminatedUnion('type', [messageItem, functionCallItem, functionCallOutputItem, reasoningItem]),
);
export type InputItem = z.output<typeof inputItem>;
type FunctionCallOutputItem = z.output<typeof functionCallOutputItem>;

const functionTool = z.object({
  type: z.literal('function', 'rlm serves only the caller\'s function tools: type must be "function"'),
  name: z.string().min(1),
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
  strict: z.boolean().nullish(),
});

const textFormat = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text') }),
  z.object({ type: z.literal('json_object') }),
  z.object({
    type: z.literal('json_schema'),
    name: z.string().regex(/^[\w-]{1,64}$/, 'name must be 1 to 64 letters, digits, _ or -'),
    description: z.string().nullish(),
    schema: z.record(z.string(), z.unknown(), 'schema must be a JSON Schema object'),
    strict: z.boolean().nullish(),
  }),
]);

/** The body of POST /v1/responses, as far as rlm reads it; other fields are ignored. */
const requestSchema = z
  .object({
    model: z.string().min(1),
    /** A string is the easy form of one user message. */
    input: z.preprocess(
      (input) => (typeof input === 'string' ? [{ type: 'message', role: 'user', content: input }] : input),
      z.array(inputItem, 'input must be a string or an array of items').min(1, 'input must hold at least one item'),
    ),
    instructions: z.string().nullish(),
    tools: z.array(functionTool).nullish(),
    tool_choice: z.union([z.enum(['auto', 'none', 'required']), z.object({ type: z.literal('function'), name: z.string() })]).nullish(),
    stream: z.boolean().nullish(),
    background: z.boolean().nullish(),
    /** false: nothing is kept once the response is sent (no GET, no previous_response_id). */
    store: z.boolean().nullish(),
    previous_response_id: z.string().min(1).nullish(),
    text: z.object({ format: textFormat.nullish() }).passthrough().nullish(),
    metadata: z.record(z.string(), z.string()).nullish(),
    /** rlm extension: the input to explore, instead of the instructions and earlier input items. */
    rlm_context: z.unknown().optional(),
    /** rlm extension: the sub-model, where the model name cannot carry it. */
    rlm_sub_model: z.string().min(1).optional(),
  })
  .passthrough();
export type ResponseCreateRequest = z.input<typeof requestSchema>;
export type ParsedResponseRequest = z.output<typeof requestSchema>;

const unionMessages: Record<string, string> = {
  type: 'unknown type: use message, function_call or function_call_output (and text, json_object or json_schema in text.format)',
};

/** Validates a Responses request body; problems become a 400 naming the field. */
export function parseResponseRequest(body: unknown): ParsedResponseRequest {
  const request = parseBody(requestSchema, body, unionMessages);
  if (request.background && request.store === false) {
    throw new ApiError(400, 'invalid_request_error', 'Invalid request: a background response must be stored to be polled: leave store out (or true) with background: true.', 'store');
  }
  return request;
}

/** Results of the caller's function calls at the end of the input, by call id. */
export function trailingFunctionOutputs(request: ParsedResponseRequest): Map<string, string> {
  const results = new Map<string, string>();
  const items = request.input;
  for (let index = items.length - 1; index >= 0 && items[index]!.type === 'function_call_output'; index--) {
    const item = items[index] as FunctionCallOutputItem;
    results.set(item.call_id, typeof item.output === 'string' ? item.output : contentText(item.output));
  }
  return results;
}

/**
 * A new run's question and input: the question is the last input item, a user message; the input
 * is the `rlm_context` extension when given, else the instructions and the earlier items (one
 * item's text, or the items as turns).
 */
export function responseQuestionAndContext(request: ParsedResponseRequest): { query: string; context: unknown } {
  const items = request.input;
  const last = items.at(-1)!;
  if (last.type !== 'message' || last.role !== 'user') {
    const got = last.type === 'message' ? `a ${last.role} message` : `a ${last.type} item`;
    throw new ApiError(400, 'invalid_request_error', `Invalid request: the last input item must be the user's question (or function_call_output items for a paused run), got ${got}`, 'input');
  }
  if (request.previous_response_id) {
    throw new ApiError(
      400,
      'invalid_request_error',
      'Invalid request: previous_response_id resumes a run that waits for the results of its function calls: send them as function_call_output items. ' +
        'To ask a new question, send the whole conversation as input (or the text to explore as rlm_context).',
      'previous_response_id',
    );
  }
  const query = contentText(last.content);
  if (!query.trim()) throw new ApiError(400, 'invalid_request_error', 'Invalid request: the last user message is empty', 'input');
  if (request.rlm_context !== undefined) return { query, context: request.rlm_context };
  const instructions = request.instructions ? [{ role: 'system', content: request.instructions }] : [];
  return { query, context: contextOfTurns([...instructions, ...items.slice(0, -1).flatMap(turnOf)]) };
}

/** An earlier item as a turn of the context; function calls and their results say what they were. */
function turnOf(item: InputItem): { role: string; content: string }[] {
  if (item.type === 'message') return [{ role: item.role, content: contentText(item.content) }];
  if (item.type === 'function_call') return [{ role: 'assistant', content: `called ${item.name}(${item.arguments})` }];
  if (item.type === 'function_call_output') return [{ role: 'tool', content: typeof item.output === 'string' ? item.output : contentText(item.output) }];
  return [];
}

export function responseCallerTools(request: ParsedResponseRequest): { specs: ToolSpec[]; toolChoice: ToolChoice | undefined } | undefined {
  if (!request.tools?.length) return undefined;
  const specs: ToolSpec[] = request.tools.map((tool) => ({
    type: 'function',
    function: { name: tool.name, ...(tool.description && { description: tool.description }), ...(tool.parameters && { parameters: tool.parameters }) },
  }));
  const choice = request.tool_choice;
  const toolChoice = typeof choice === 'object' && choice ? { type: 'function' as const, function: { name: choice.name } } : (choice ?? undefined);
  return { specs, toolChoice };
}

/** The schema the answer must match, from `text.format`. */
export function responseOutput(request: ParsedResponseRequest): OutputSchemaSpec | undefined {
  const format = request.text?.format;
  return outputOfFormat(format && { type: format.type, schema: format.type === 'json_schema' ? format.schema : undefined }, 'text.format.schema');
}
