import { randomUUID } from 'node:crypto';
import { describeError } from '../errors.js';
import { estimateTokens } from './token-estimate.js';
import type { ModelScheduler } from './scheduler.js';
import type { ModelProvider } from './provider.js';
import type { ChatRequest, ChatResponse, TokenUsage } from './types.js';
import type { UsageTracker } from './usage.js';

export type ModelCallEvent =
  /** The call was made; it may wait in its model's queue (see llm-call-running). */
  | { type: 'llm-call-start'; callId: string; model: string; depth: number; purpose: 'root' | 'sub'; request: Omit<ChatRequest, 'signal'> }
  /** The call left the queue: its request is being sent. */
  | { type: 'llm-call-running'; callId: string; model: string; depth: number; purpose: 'root' | 'sub' }
  | {
      type: 'llm-call-end';
      callId: string;
      model: string;
      depth: number;
      purpose: 'root' | 'sub';
      request: Omit<ChatRequest, 'signal'>;
      response?: ChatResponse;
      /** USD for this call, or null when the model has no known price (absent when the call failed). */
      costUsd?: number | null;
      durationMs: number;
      /** Set when the call failed. */
      error?: { name: string; message: string };
    };

interface ModelGatewayOptions {
  /** Resolves each request's model name to the LanguageModel that serves it. */
  models: ModelProvider;
  scheduler: ModelScheduler;
  usage: UsageTracker;
  /** Depth in the run tree of the run making these calls (root = 0). */
  depth?: number;
  onEvent?: (event: ModelCallEvent) => void;
  /** Why the calls are made, reported in events: the root model's turns, or sub-calls from code. */
  purpose?: 'root' | 'sub';
  /** Checks run before and after every call (run limits, a shared spend account); throwing stops the call. */
  guard?: { beforeCall(model: string): void | Promise<void>; afterCall(model: string, usage: TokenUsage): void | Promise<void> };
  /** Aborts every call made through this gateway (the run's signal). */
  signal?: AbortSignal;
}

/**
 * Every model call of a run goes through a gateway: it waits for a slot of the shared scheduler,
 * counts usage into the run's tracker, and reports start and end events.
 */
export class ModelGateway {
  readonly depth: number;

  constructor(private readonly options: ModelGatewayOptions) {
    this.depth = options.depth ?? 0;
  }

  /** A gateway for a child run: one level deeper, same scheduler, usage counted into this run too. */
  child(): ModelGateway {
    return new ModelGateway({ ...this.options, usage: this.options.usage.child(), depth: this.depth + 1 });
  }

  /** The same gateway (same usage, depth and scheduler) with a different purpose or event sink. */
  with(overrides: Pick<ModelGatewayOptions, 'purpose' | 'onEvent'>): ModelGateway {
    return new ModelGateway({ ...this.options, ...overrides });
  }

  get usage(): UsageTracker {
    return this.options.usage;
  }

  async chat(request: ChatRequest): Promise<ChatResponse> {
    const { models, scheduler, usage, onEvent, guard } = this.options;
    const callId = randomUUID();
    const { signal: requestSignal, onRetryAfter: callerOnRetryAfter, ...shown } = request;
    const signals = [requestSignal, this.options.signal].filter((signal): signal is AbortSignal => signal !== undefined);
    const signal = signals.length > 1 ? AbortSignal.any(signals) : signals[0];
    const base = { callId, model: request.model, depth: this.depth, purpose: this.options.purpose ?? 'sub', request: shown };
    onEvent?.({ type: 'llm-call-start', ...base });
    const started = performance.now();
    let response: ChatResponse;
    let inFlight = false;
    try {
      response = await scheduler.run(
        request.model,
        async () => {
          await guard?.beforeCall(request.model);
          inFlight = true;
          onEvent?.({ type: 'llm-call-running', callId, model: request.model, depth: base.depth, purpose: base.purpose });
          // A server's retry-after holds back every request to this model that shares the scheduler.
          const onRetryAfter = (ms: number) => {
            scheduler.pauseModel(request.model, ms);
            callerOnRetryAfter?.(ms);
          };
          return models.getModel(request.model).chat({ ...request, signal, onRetryAfter });
        },
        signal,
      );
    } catch (error) {
      // A call cut off in flight may still be billed for its prompt: count that, so a budget errs high.
      if (inFlight && signal?.aborted) {
        const estimated = { inputTokens: estimateTokens(request.messages), outputTokens: 0 };
        usage.record(request.model, estimated);
        await guard?.afterCall(request.model, estimated);
      }
      const { name, message } = describeError(error);
      onEvent?.({ type: 'llm-call-end', ...base, durationMs: performance.now() - started, error: { name, message } });
      throw error;
    }
    usage.record(request.model, response.usage);
    onEvent?.({ type: 'llm-call-end', ...base, response, costUsd: usage.costOf(request.model, response.usage), durationMs: performance.now() - started });
    await guard?.afterCall(request.model, response.usage);
    return response;
  }
}
