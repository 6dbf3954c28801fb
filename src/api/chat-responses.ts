import { randomUUID } from 'node:crypto';
import type { ToolCall } from '../lm/types.js';
import type { RunStep, Spent, TokenCount } from './active-run.js';
import { textPieces } from './text-pieces.js';

type Step = Exclude<RunStep, { type: 'failed' }>;
type FinishReason = 'stop' | 'length' | 'tool_calls';

/**
 * The `rlm` extension object every completion carries, so a caller can tell how its answer came
 * about: `forced` when the run used all its iterations and the answer was asked for in one last
 * call (then `finish_reason` is "length"), the root iterations, and the USD this response's calls
 * cost (null when a model has no price).
 */
export interface RlmExtension {
  forced: boolean;
  iterations: number;
  cost_usd: number | null;
}

export function extensionOf(step: Step, spent: Spent): RlmExtension {
  return { forced: step.type === 'answer' && step.forced, iterations: step.iterations, cost_usd: spent.costUsd };
}

/**
 * A forced answer is cut short by the iteration limit: OpenAI says "length" for an answer cut by its
 * limit. A structured answer is whole JSON that matched its schema, forced or not: "stop" (clients
 * such as the openai SDK's `parse()` refuse "length"); `rlm.forced` still tells.
 */
function finishReasonOf(step: Step): FinishReason {
  if (step.type === 'tool-calls') return 'tool_calls';
  return step.forced && !step.structured ? 'length' : 'stop';
}

/** An answer or a hand-back of tool calls, as OpenAI's chat.completion object. */
export function completionOf(step: Step, model: string, spent: Spent) {
  const message =
    step.type === 'answer'
      ? { role: 'assistant' as const, content: step.answer, refusal: null }
      : { role: 'assistant' as const, content: null, refusal: null, tool_calls: step.calls.map(wireToolCall) };
  return {
    id: completionId(),
    object: 'chat.completion' as const,
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message, finish_reason: finishReasonOf(step), logprobs: null }],
    usage: spent.usage,
    rlm: extensionOf(step, spent),
  };
}

export type ChatCompletion = ReturnType<typeof completionOf>;

/** One chunk of a streamed completion, as OpenAI sends it; the one with the finish reason carries `rlm`. */
export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: { index: number; delta: ChunkDelta; finish_reason: FinishReason | null; logprobs: null }[];
  usage?: TokenCount;
  rlm?: RlmExtension;
}

/** The chunks that stream a step: content or tool calls (name first, arguments after), then the finish with the `rlm` object. */
export function* chunksOf(id: string, step: Step, model: string, spent: Spent): Generator<ChatCompletionChunk> {
  if (step.type === 'answer') {
    for (const piece of textPieces(step.answer)) yield chunk(id, model, { content: piece });
  } else {
    for (const [index, call] of step.calls.entries()) {
      yield chunk(id, model, { tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }] });
      for (const piece of textPieces(call.arguments)) yield chunk(id, model, { tool_calls: [{ index, function: { arguments: piece } }] });
    }
  }
  yield { ...chunk(id, model, {}, finishReasonOf(step)), rlm: extensionOf(step, spent) };
}

/** What one streamed chunk adds to the message, as OpenAI sends it. */
interface ChunkDelta {
  role?: 'assistant';
  content?: string;
  tool_calls?: { index: number; id?: string; type?: 'function'; function: { name?: string; arguments: string } }[];
}

export function chunk(id: string, model: string, delta: ChunkDelta, finishReason: FinishReason | null = null, usage?: TokenCount): ChatCompletionChunk {
  return {
    id,
    object: 'chat.completion.chunk' as const,
    created: Math.floor(Date.now() / 1000),
    model,
    choices: usage ? [] : [{ index: 0, delta, finish_reason: finishReason, logprobs: null }],
    ...(usage && { usage }),
  };
}

export function completionId(): string {
  return `chatcmpl-rlm-${randomUUID()}`;
}

function wireToolCall(call: ToolCall) {
  return { id: call.id, type: 'function' as const, function: { name: call.name, arguments: call.arguments } };
}
