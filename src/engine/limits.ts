import { ConfigurationError, describeError, RlmError } from '../errors.js';
import { formatDuration, formatCount } from '../format.js';
import type { TokenUsage } from '../lm/types.js';
import type { UsageSummary, UsageTracker } from '../lm/usage.js';
import type { SpendAccount } from './spend-account.js';

export type LimitCode = 'max_iterations' | 'max_tokens' | 'max_budget' | 'max_time' | 'max_errors' | 'max_llm_calls' | 'context_window';

/** What a run had when it ended without an answer. */
export interface RunFailureDetails {
  /** The best answer so far: the FINAL text or prose of the root model's last reply, never code. */
  partialAnswer?: string | undefined;
  /** Calls, tokens and cost of the whole run tree up to the stop. */
  usage?: UsageSummary | undefined;
  /** The trajectory log, when one was written. */
  logPath?: string | undefined;
}

/**
 * A run that ended without an answer: a model failure, a sandbox that could not start, ... Its
 * `code` is the cause's (`model_error`, `sandbox_start_failed`, ...), its message the cause's
 * message, and it carries what the run had: partial answer, usage, log path. Errors are complete
 * when thrown: `with()` returns a copy with more details.
 */
export class RunFailedError extends RlmError {
  override name = 'RunFailedError';
  readonly partialAnswer: string | undefined;
  readonly usage: UsageSummary | undefined;
  readonly logPath: string | undefined;

  constructor(code: string, message: string, details: RunFailureDetails = {}, options: { cause?: unknown } = {}) {
    super(code, message, options);
    this.partialAnswer = details.partialAnswer;
    this.usage = details.usage;
    this.logPath = details.logPath;
  }

  /** Wraps whatever stopped a run. */
  static from(error: unknown, details: RunFailureDetails): RunFailedError {
    if (error instanceof RunFailedError) return error.with(details);
    const code = error instanceof RlmError ? error.code : 'run_failed';
    const { message } = describeError(error);
    return new RunFailedError(code, message, details, { cause: error });
  }

  with(details: RunFailureDetails): RunFailedError {
    return new RunFailedError(this.code, this.message, { ...this.details(), ...details }, { cause: this.cause });
  }

  protected details(): RunFailureDetails {
    return { partialAnswer: this.partialAnswer, usage: this.usage, logPath: this.logPath };
  }
}

/** A run stopped at one of its limits; carries what it had, as every failed run does. */
export class RunLimitError extends RunFailedError {
  override name = 'RunLimitError';

  constructor(
    override readonly code: LimitCode,
    message: string,
    details: RunFailureDetails = {},
  ) {
    super(code, message, details);
  }

  override with(details: RunFailureDetails): RunLimitError {
    return new RunLimitError(this.code, this.message, { ...this.details(), ...details });
  }
}

/** The limits shared by a run and all of its child runs. */
interface TreeLimits {
  maxTokens?: number | undefined;
  maxBudgetUsd?: number | undefined;
  maxLlmCalls?: number | undefined;
  maxTimeMs?: number | undefined;
  /** Money shared with other runs (a batch's): checked before every call, charged after it. */
  spendAccount?: SpendAccount | undefined;
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
  async beforeCall(model: string): Promise<void> {
    this.signal.throwIfAborted();
    const { maxLlmCalls, maxBudgetUsd, spendAccount } = this.limits;
    if ((maxBudgetUsd !== undefined || spendAccount) && !this.usage.hasPrice(model)) {
      throw new ConfigurationError(`The run has a budget, and model "${model}" has no price: give one with --price ${model}=IN,OUT or the prices option.`);
    }
    // Counted when calls start, so a batch in flight cannot overshoot the limit.
    if (maxLlmCalls !== undefined && this.callsStarted >= maxLlmCalls) {
      this.fail(new RunLimitError('max_llm_calls', `Model call limit reached: ${maxLlmCalls} calls were made.`));
    }
    this.callsStarted++;
    if (spendAccount && (await spendAccount.remaining()) <= 0) {
      this.fail(new RunLimitError('max_budget', 'Shared budget reached: the runs sharing it (a batch) have spent it all. Raise --max-budget to go on.'));
    }
  }

  /**
   * Charges one call's cost to the shared account, and stops the tree if the usage so far breaks a
   * limit. It does not throw: the reply that crossed the limit still reaches its caller (it may be
   * the best partial answer); what runs next sees the aborted signal.
   */
  async afterCall(model: string, callUsage: TokenUsage): Promise<void> {
    const cost = this.usage.costOf(model, callUsage);
    if (this.limits.spendAccount && cost !== null) await this.limits.spendAccount.charge(cost);
    const summary = this.usage.summary();
    const { maxTokens, maxBudgetUsd } = this.limits;
    const tokens = summary.inputTokens + summary.outputTokens;
    if (maxTokens !== undefined && tokens > maxTokens) {
      this.stop(new RunLimitError('max_tokens', `Token limit reached: ${formatCount(tokens)} tokens used, the limit is ${formatCount(maxTokens)}.`));
    } else if (maxBudgetUsd !== undefined && summary.costUsd !== null && summary.costUsd > maxBudgetUsd) {
      // (With a budget, no call to a model without a price is made, so the cost is known.)
      const [spent, budget] = formatUsdPair(summary.costUsd, maxBudgetUsd);
      this.stop(new RunLimitError('max_budget', `Budget reached: $${spent} spent, more than the budget of $${budget}.`));
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

/** Two amounts with enough decimals that the larger one never reads as equal to the smaller. */
function formatUsdPair(spent: number, budget: number): [string, string] {
  let decimals = 4;
  while (decimals < 10 && spent.toFixed(decimals) === budget.toFixed(decimals)) decimals++;
  return [spent.toFixed(decimals), budget.toFixed(decimals)];
}
