import { randomUUID } from 'node:crypto';
import type { Spent } from './active-run.js';
import { extensionOf, type RlmExtension } from './chat-responses.js';
import type { ReachedStep } from './run-host.js';
import { textPieces } from './text-pieces.js';

export type ResponseStatus = 'queued' | 'in_progress' | 'completed' | 'failed' | 'cancelled';

export interface OutputText {
  type: 'output_text';
  text: string;
  annotations: never[];
  logprobs: never[];
}

export type OutputItem =
  | { type: 'message'; id: string; status: 'in_progress' | 'completed'; role: 'assistant'; content: OutputText[] }
  | { type: 'function_call'; id: string; status: 'in_progress' | 'completed'; call_id: string; name: string; arguments: string };

export interface ResponseUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

/** What a response repeats of its request, as OpenAI's do. */
export interface ResponseEcho {
  model: string;
  /** Always null: the instructions are the run's context, often far too large to send back. */
  instructions: null;
  tools: unknown[];
  tool_choice: unknown;
  text: { format: unknown };
  metadata: Record<string, string>;
  parallel_tool_calls: boolean;
  previous_response_id: string | null;
  store: boolean;
  background: boolean;
}

/** Where a response stands: what changes while its run works. */
export interface ResponseState {
  status: ResponseStatus;
  output: OutputItem[];
  usage: ResponseUsage | null;
  error: { code: string; message: string } | null;
  rlm: RlmExtension | null;
}

/** OpenAI's response object, with the `rlm` extension (forced, iterations, cost) once the run has a step. */
export type ResponseObject = ResponseEcho &
  ResponseState & {
    id: string;
    object: 'response';
    created_at: number;
    incomplete_details: null;
    temperature: null;
    top_p: null;
    truncation: 'disabled';
  };

/** One server-sent event of a response stream, before it is numbered. */
export interface UnnumberedEvent {
  type: string;
  [field: string]: unknown;
}

/** One server-sent event of a response stream; `sequence_number` counts from 0 for each response. */
export type ResponseEvent = UnnumberedEvent & { sequence_number: number };

export function responseObject(id: string, createdAt: number, echo: ResponseEcho, state: ResponseState): ResponseObject {
  return { id, object: 'response', created_at: createdAt, ...echo, ...state, output: [...state.output], incomplete_details: null, temperature: null, top_p: null, truncation: 'disabled' };
}

export function responseId(): string {
  return `resp_${randomUUID().replaceAll('-', '')}`;
}

function itemId(prefix: 'msg' | 'fc'): string {
  return `${prefix}_${randomUUID().replaceAll('-', '')}`;
}

/** An answer as one assistant message, or a hand-back as one function_call item per call. */
export function outputItemsOf(step: ReachedStep): OutputItem[] {
  if (step.type === 'answer') {
    return [{ type: 'message', id: itemId('msg'), status: 'completed', role: 'assistant', content: [outputText(step.answer)] }];
  }
  return step.calls.map((call) => ({ type: 'function_call', id: itemId('fc'), status: 'completed', call_id: call.id, name: call.name, arguments: call.arguments }));
}

export function usageOf(spent: Spent): ResponseUsage {
  const { prompt_tokens, completion_tokens, total_tokens } = spent.usage;
  return { input_tokens: prompt_tokens, input_tokens_details: { cached_tokens: 0 }, output_tokens: completion_tokens, output_tokens_details: { reasoning_tokens: 0 }, total_tokens };
}

export function stateOf(step: ReachedStep, spent: Spent): ResponseState {
  return { status: 'completed', output: outputItemsOf(step), usage: usageOf(spent), error: null, rlm: extensionOf(step, spent) };
}

function outputText(text: string): OutputText {
  return { type: 'output_text', text, annotations: [], logprobs: [] };
}

/**
 * The events that stream one output item as OpenAI sends them: the item added (empty), its text or
 * arguments in deltas, their end, the item done.
 */
export function* itemEvents(item: OutputItem, outputIndex: number): Generator<UnnumberedEvent> {
  const at = { item_id: item.id, output_index: outputIndex };
  if (item.type === 'message') {
    const text = item.content[0]!.text;
    yield { type: 'response.output_item.added', output_index: outputIndex, item: { ...item, status: 'in_progress', content: [] } };
    yield { type: 'response.content_part.added', ...at, content_index: 0, part: outputText('') };
    for (const delta of textPieces(text)) yield { type: 'response.output_text.delta', ...at, content_index: 0, delta, logprobs: [] };
    yield { type: 'response.output_text.done', ...at, content_index: 0, text, logprobs: [] };
    yield { type: 'response.content_part.done', ...at, content_index: 0, part: outputText(text) };
  } else {
    yield { type: 'response.output_item.added', output_index: outputIndex, item: { ...item, status: 'in_progress', arguments: '' } };
    for (const delta of textPieces(item.arguments)) yield { type: 'response.function_call_arguments.delta', ...at, delta };
    yield { type: 'response.function_call_arguments.done', ...at, name: item.name, arguments: item.arguments };
  }
  yield { type: 'response.output_item.done', output_index: outputIndex, item };
}
