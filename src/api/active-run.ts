import type { RlmEvent } from '../engine/events.js';
import type { OutputSchemaSpec } from '../engine/output-schema.js';
import type { RLM } from '../engine/rlm.js';
import type { ToolCall, ToolChoice, ToolSpec } from '../lm/types.js';
import { ApiError } from './errors.js';
import { CHAT_TOOL_RESULTS, type ToolResultWording } from './tool-results.js';

/** Where a run stands when it has something for its caller. */
export type RunStep =
  | { type: 'tool-calls'; calls: ToolCall[]; iterations: number }
  /** `structured`: the answer is JSON checked against the request's `response_format`. */
  | { type: 'answer'; answer: string; forced: boolean; structured: boolean; iterations: number }
  | { type: 'failed'; error: unknown };

export interface TokenCount {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** What one response covers: its tokens, and their cost in USD (null when a model had no price). */
export interface Spent {
  usage: TokenCount;
  costUsd: number | null;
}

export interface ActiveRunInput {
  context: unknown;
  query: string;
  /** The schema the answer must match (from `response_format`); the answer is then its JSON text. */
  output?: OutputSchemaSpec | undefined;
  callerTools?: { specs: ToolSpec[]; toolChoice: ToolChoice | undefined } | undefined;
}

/**
 * One RLM run behind an OpenAI-compatible API. It runs on its own; when it hands tool calls back
 * to the caller it waits (its sandbox and variables intact) until `deliver` brings the results,
 * which may come with a later HTTP request. `next()` waits for its next step.
 */
export class ActiveRun {
  private readonly controller = new AbortController();
  private reached: RunStep | undefined;
  private waiter: ((step: RunStep) => void) | undefined;
  private handBack: { calls: ToolCall[]; resolve: (outputs: string[]) => void } | undefined;
  private readonly tokens = { input: 0, output: 0, reportedInput: 0, reportedOutput: 0 };
  private readonly cost = { usd: 0, reportedUsd: 0, unpriced: false };
  /** Root iterations started so far. */
  private iterations = 0;

  constructor(rlm: RLM, input: ActiveRunInput) {
    const callerTools = input.callerTools && { ...input.callerTools, call: (calls: ToolCall[], signal: AbortSignal) => this.waitForResults(calls, signal) };
    const { context, query, output } = input;
    void this.follow(rlm.stream({ context, query, output, signal: this.controller.signal, ...(callerTools && { callerTools }) }));
  }

  /** The run's next step; waiting ends early (and the run is cancelled) if `signal` aborts. */
  next(signal?: AbortSignal): Promise<RunStep> {
    const reached = this.reached;
    this.reached = undefined;
    if (reached) return Promise.resolve(reached);
    if (signal?.aborted) {
      // An abort listener added now would never fire: the run would go on with nobody waiting.
      this.cancel(signal.reason);
      return Promise.reject(signal.reason as Error);
    }
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        this.cancel(signal!.reason);
        reject(signal!.reason as Error);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiter = (step) => {
        signal?.removeEventListener('abort', onAbort);
        resolve(step);
      };
    });
  }

  /** Ids of the tool calls the run waits for. */
  get pendingCallIds(): string[] {
    return this.handBack?.calls.map((call) => call.id) ?? [];
  }

  /** The caller's results, by tool call id: every call handed back needs one. */
  deliver(results: Map<string, string>, wording: ToolResultWording = CHAT_TOOL_RESULTS): void {
    const handBack = this.handBack;
    if (!handBack) throw new ApiError(409, 'invalid_request_error', 'This run is not waiting for tool results.', wording.param);
    const missing = handBack.calls.filter((call) => !results.has(call.id)).map((call) => call.id);
    if (missing.length > 0) {
      throw new ApiError(400, 'invalid_request_error', `Tool results are missing for ${missing.join(', ')}: ${wording.perCall}.`, wording.param, 'tool_results_missing');
    }
    this.handBack = undefined;
    handBack.resolve(handBack.calls.map((call) => results.get(call.id)!));
  }

  /** Tokens used, and what they cost, since the last time this was asked: for one response. */
  takeUsage(): Spent {
    const input = this.tokens.input - this.tokens.reportedInput;
    const output = this.tokens.output - this.tokens.reportedOutput;
    const usd = this.cost.usd - this.cost.reportedUsd;
    this.tokens.reportedInput = this.tokens.input;
    this.tokens.reportedOutput = this.tokens.output;
    this.cost.reportedUsd = this.cost.usd;
    const costUsd = this.cost.unpriced ? null : Math.round(usd * 1e6) / 1e6;
    this.cost.unpriced = false;
    return { usage: { prompt_tokens: input, completion_tokens: output, total_tokens: input + output }, costUsd };
  }

  /** Stops the run and its sandboxes. */
  cancel(reason: unknown): void {
    this.controller.abort(reason);
  }

  private async follow(events: AsyncIterable<RlmEvent>): Promise<void> {
    try {
      for await (const event of events) {
        if (event.type === 'llm-call-end' && event.response) {
          this.tokens.input += event.response.usage.inputTokens;
          this.tokens.output += event.response.usage.outputTokens;
          if (event.costUsd === null) this.cost.unpriced = true;
          else this.cost.usd += event.costUsd ?? 0;
        }
        if (event.type === 'iteration-start' && event.depth === 0) this.iterations = Math.min(event.iteration, event.maxIterations);
        if (event.type === 'run-end') {
          const { response, forced, iterations } = event.result;
          this.reach({ type: 'answer', answer: response, forced, structured: 'output' in event.result, iterations });
        }
      }
    } catch (error) {
      this.reach({ type: 'failed', error });
    }
  }

  private waitForResults(calls: ToolCall[], signal: AbortSignal): Promise<string[]> {
    return new Promise((resolve, reject) => {
      signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
      this.handBack = { calls, resolve };
      this.reach({ type: 'tool-calls', calls, iterations: this.iterations });
    });
  }

  private reach(step: RunStep): void {
    const waiter = this.waiter;
    this.waiter = undefined;
    if (waiter) waiter(step);
    else this.reached = step;
  }
}
