import { RlmError } from '../errors.js';
import { formatDuration } from '../format.js';
import type { UsageSummary, UsageTracker } from '../lm/usage.js';

export type LimitCode = 'max_iterations' | 'max_tokens' | 'max_budget' | 'max_time' | 'max_errors' | 'max_llm_calls';

/**
 * A run stopped at one of its limits. Carries the best answer the run had so far (the last
 * non-empty reply of the root model, or undefined) and the usage up to the stop.
 */
export class RunLimitError extends RlmError {
  override name = 'RunLimitError';
  readonly partialAnswer: string | undefined;
  readonly usage: UsageSummary | undefined;

  constructor(
    override readonly code: LimitCode,
    message: string,
    details: { partialAnswer?: string | undefined; usage?: UsageSummary | undefined } = {},
  ) {
    super(code, message);
    this.partialAnswer = details.partialAnswer;
    this.usage = details.usage;
  }

  /** The same stop with more of what the run knew when it ended (errors are not changed once thrown). */
  with(details: { partialAnswer?: string | undefined; usage?: UsageSummary | undefined }): RunLimitError {
    return new RunLimitError(this.code, this.message, { partialAnswer: this.partialAnswer, usage: this.usage, ...details });
  }
}

/** The limits shared by a run and all of its child runs. */
export interface TreeLimits {
  maxTokens?: number | undefined;
  maxBudgetUsd?: number | undefined;
  maxLlmCalls?: number | undefined;
  maxTimeMs?: number | undefined;
}

/**
 * Watches the limits of a whole run tree. Children inherit what remains simply by sharing it:
 * every model call anywhere in the tree is checked before it starts and after it ends, and the
 * first limit hit aborts the tree's signal, which stops running blocks and in-flight calls.
 */
export class TreeBudget {
  private readonly controller = new AbortController();
  private readonly deadline: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private callsStarted = 0;

  constructor(
    private readonly limits: TreeLimits,
    private readonly usage: UsageTracker,
    callerSignal?: AbortSignal,
  ) {
    if (limits.maxTimeMs !== undefined) {
      this.deadline = Date.now() + limits.maxTimeMs;
      this.timer = setTimeout(
        () => this.stop(new RunLimitError('max_time', `Time limit reached: the run took longer than ${formatDuration(limits.maxTimeMs!)}.`)),
        limits.maxTimeMs,
      );
      this.timer.unref?.();
    }
    if (callerSignal) {
      if (callerSignal.aborted) this.controller.abort(callerSignal.reason);
      else callerSignal.addEventListener('abort', () => this.stop(callerSignal.reason), { once: true });
    }
  }

  /** Aborted when a limit is hit or the caller cancels; the reason says which. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Milliseconds left before the time limit, if there is one. */
  remainingMs(): number | undefined {
    return this.deadline === undefined ? undefined : Math.max(0, this.deadline - Date.now());
  }

  /** Model calls the tree may still start under maxLlmCalls; undefined when there is no such limit. */
  remainingCalls(): number | undefined {
    const { maxLlmCalls } = this.limits;
    return maxLlmCalls === undefined ? undefined : Math.max(0, maxLlmCalls - this.callsStarted);
  }

  /** Throws (and stops the tree) if another model call would break a limit. */
  beforeCall(): void {
    this.signal.throwIfAborted();
    const { maxLlmCalls } = this.limits;
    // Counted when calls start, so a batch in flight cannot overshoot the limit.
    if (maxLlmCalls !== undefined && this.callsStarted >= maxLlmCalls) {
      this.fail(new RunLimitError('max_llm_calls', `Model call limit reached: ${maxLlmCalls} calls were made.`));
    }
    this.callsStarted++;
  }

  /**
   * Stops the tree if the usage so far breaks a limit. It does not throw: the reply that crossed
   * the limit still reaches its caller (it may be the best partial answer); what runs next sees
   * the aborted signal.
   */
  afterCall(): void {
    const summary = this.usage.summary();
    const { maxTokens, maxBudgetUsd } = this.limits;
    const tokens = summary.inputTokens + summary.outputTokens;
    if (maxTokens !== undefined && tokens > maxTokens) {
      this.stop(new RunLimitError('max_tokens', `Token limit reached: ${tokens.toLocaleString('en-US')} tokens used, the limit is ${maxTokens.toLocaleString('en-US')}.`));
    } else if (maxBudgetUsd !== undefined && summary.costUsd > maxBudgetUsd) {
      this.stop(new RunLimitError('max_budget', `Budget reached: $${summary.costUsd.toFixed(4)} spent, the budget is $${maxBudgetUsd.toFixed(4)}.`));
    }
  }

  /** Stops the tree for a reason found elsewhere (another limit, an error). */
  stop(reason: unknown): void {
    if (!this.controller.signal.aborted) this.controller.abort(reason);
    this.dispose();
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private fail(error: RunLimitError): never {
    this.stop(error);
    throw error;
  }
}
