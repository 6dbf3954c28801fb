import { RlmError } from '../errors.js';
import type { ModelCallEvent } from '../lm/gateway.js';
import type { ChatMessage, ToolCall } from '../lm/types.js';
import type { UsageSummary } from '../lm/usage.js';
import type { ExecuteResult } from '../sandbox/sandbox.js';
import type { RejectedFinal } from '../sandbox/schema-problems.js';

/** One code block of an iteration and what running it produced. */
export type { RejectedFinal };

export interface CodeBlockRecord {
  code: string;
  language: 'js' | 'ts';
  result: ExecuteResult;
  /** Sub-calls made while the block ran (llm_query, rlm_query, ...), with child trajectories. */
  subcalls: SubcallRecord[];
  /** Host tools called while the block ran. */
  toolCalls: ToolCallRecord[];
  /** FINAL calls of the block whose value did not match the output schema (only with `output`). */
  rejectedFinals?: RejectedFinal[];
}


/** One host tool call made by model code. */
export interface ToolCallRecord {
  name: string;
  callId: string;
  success: boolean;
  result?: unknown;
  error?: string | undefined;
  durationMs: number;
}

/** One llm_query / rlm_query made by model code, as the trajectory log shows it. */
export interface SubcallRecord {
  kind: 'llm' | 'rlm';
  model: string;
  prompt: unknown;
  response: string | null;
  durationMs: number;
  usage: { inputTokens: number; outputTokens: number } | undefined;
  error?: string;
  /** For child RLMs: their iterations. */
  iterations?: IterationRecord[];
}

/** One turn of a run: the prompt, the root model's reply, and the code it ran. */
export interface IterationRecord {
  /** 1-based. */
  index: number;
  prompt: ChatMessage[];
  response: string;
  codeBlocks: CodeBlockRecord[];
  finalAnswer: string | null;
  durationMs: number;
  /** Calls of the root model to tools of the caller, handed back in this turn (ids as the caller saw them). */
  callerToolCalls?: ToolCall[];
  /** The turn's text FINAL (or forced answer), refused because it does not match the output schema. */
  rejectedFinal?: RejectedFinal;
}

/** A root conversation replaced by its summary to stay inside the model's context window. */
export interface CompactionRecord {
  tokensBefore: number;
  tokensAfter: number;
  contextWindow: number;
  messagesReplaced: number;
  summary: string;
  durationMs: number;
}

interface RunInfo {
  runId: string;
  /** 0 for the root run, 1 for its children, ... */
  depth: number;
}

/** Everything `rlm.stream()` yields, in order. Child runs report with their own runId and depth. */
export type RlmEvent =
  | (RunInfo & { type: 'run-start'; model: string; parentRunId?: string | undefined; query?: string | undefined; logPath?: string | undefined })
  | (RunInfo & { type: 'iteration-start'; iteration: number; maxIterations: number })
  | (RunInfo & { type: 'iteration-end'; iteration: number; record: IterationRecord })
  | (RunInfo & { type: 'code-start'; iteration: number; block: number; code: string; language: 'js' | 'ts' })
  | (RunInfo & { type: 'code-end'; iteration: number; block: number; result: ExecuteResult })
  | (RunInfo & ModelCallEvent)
  | (RunInfo & { type: 'tool-call-start'; callId: string; toolName: string; arguments: unknown })
  | (RunInfo & { type: 'tool-call-end'; callId: string; toolName: string; result?: string; error?: string; durationMs: number })
  | (RunInfo & { type: 'subcall-start'; childRunId: string; model: string; promptPreview: string })
  | (RunInfo & { type: 'subcall-end'; childRunId: string; model: string; durationMs: number; error?: string })
  | (RunInfo & { type: 'caller-tool-calls'; calls: ToolCall[] })
  | (RunInfo & { type: 'compaction' } & CompactionRecord)
  | (RunInfo & { type: 'final'; answer: string; source: 'code' | 'text' | 'forced' })
  | (RunInfo & { type: 'run-end'; result: RlmResult })
  | (RunInfo & { type: 'error'; error: { name: string; code?: string; message: string } });

export interface RlmResult {
  /** The final answer; with `output`, the JSON text of `output`. */
  response: string;
  /** With `output` (an output schema): the answer, parsed and checked against it. */
  output?: unknown;
  /** True when the iteration limit was reached and the answer was asked for in one last call. */
  forced: boolean;
  /** Usage of the whole run tree, per model, children included. */
  usage: UsageSummary;
  /** Root iterations used. */
  iterations: number;
  durationMs: number;
  trajectory: IterationRecord[];
  /** The JSONL trajectory file, when `logDir` was set. */
  logPath?: string;
  runId: string;
}

/**
 * What a run's events end with: the result its run-end event carries. A stream that ends without one
 * is a bug in rlm (a run reports its failure by making the stream throw), not a fault of the caller.
 */
export async function resultOf(events: AsyncIterable<RlmEvent>): Promise<RlmResult> {
  for await (const event of events) if (event.type === 'run-end') return event.result;
  throw new RlmError('internal_error', 'The run ended without a result or an error. This is a bug in rlm: please report it.');
}

/**
 * A push-to-pull queue: producers push events as they happen, one consumer iterates them. The run
 * never waits for the consumer (events are small), so a slow consumer cannot stall a run.
 */
export class EventChannel<T> implements AsyncIterable<T> {
  private readonly buffer: T[] = [];
  private waiting: ((result: IteratorResult<T>) => void) | undefined;
  private failure: { error: unknown } | undefined;
  private closed = false;
  private rejectWaiting: ((error: unknown) => void) | undefined;

  /** @param onReturn called when the consumer stops early (`break` out of `for await`). */
  constructor(private readonly onReturn?: () => void) {}

  push(item: T): void {
    if (this.closed) return;
    if (this.waiting) {
      const resolve = this.waiting;
      this.waiting = undefined;
      this.rejectWaiting = undefined;
      resolve({ value: item, done: false });
    } else {
      this.buffer.push(item);
    }
  }

  close(): void {
    this.closed = true;
    this.waiting?.({ value: undefined, done: true });
    this.waiting = undefined;
  }

  fail(error: unknown): void {
    this.failure = { error };
    this.closed = true;
    this.rejectWaiting?.(error);
    this.waiting = undefined;
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        if (this.buffer.length > 0) return Promise.resolve({ value: this.buffer.shift()!, done: false });
        if (this.failure) return Promise.reject(this.failure.error);
        if (this.closed) return Promise.resolve({ value: undefined, done: true });
        return new Promise<IteratorResult<T>>((resolve, reject) => {
          this.waiting = resolve;
          this.rejectWaiting = reject;
        });
      },
      return: () => {
        if (!this.closed) this.onReturn?.();
        this.closed = true;
        this.buffer.length = 0;
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}
