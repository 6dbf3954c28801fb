import { isolateErrorText, isTimeoutText } from './isolate-errors.js';

type Outcome = 'completed' | 'timeout' | 'memory' | 'compile-error' | 'unhandled-rejection';
export type StepResult = { outcome: Outcome; failure?: string };

/**
 * The execution time a block has left. Each step (the first run, each resumption after a reply)
 * gets what is left as its timeout; time spent outside the isolate, waiting for the host, is not
 * used up, just as the isolate's own timeout pauses then.
 */
export class ExecutionBudget {
  private usedMs = 0;
  /** The running step: when it started, with the time spent outside the isolate until then. */
  private step: { started: number; outsideBefore: number } | undefined;

  /**
   * `outsideMs` reads the time the run's model code has spent in calls to the worker so far; the
   * isolate `isDisposed` tells a step that failed at the memory limit from other failures.
   */
  constructor(
    private readonly limitMs: number,
    private readonly outsideMs: () => number,
    private readonly isDisposed: () => boolean,
  ) {}

  /** Time the block has left now, the running step's use so far included. */
  leftMs(): number {
    const step = this.step;
    const stepUsedMs = step ? performance.now() - step.started - (this.outsideMs() - step.outsideBefore) : 0;
    return this.limitMs - this.usedMs - stepUsedMs;
  }

  run(step: (timeoutMs: number) => Promise<unknown>): Promise<StepResult> {
    return this.runAtLeast(0, step);
  }

  /** Like `run`, but with at least `minimumMs` even when the block has used up its time. */
  async runAtLeast(minimumMs: number, step: (timeoutMs: number) => Promise<unknown>): Promise<StepResult> {
    const leftMs = Math.max(this.limitMs - this.usedMs, minimumMs);
    if (leftMs <= 0) return { outcome: 'timeout' };
    const started = performance.now();
    const outsideBefore = this.outsideMs();
    this.step = { started, outsideBefore };
    try {
      await step(Math.ceil(leftMs));
      return { outcome: 'completed' };
    } catch (error) {
      return this.failedStep(error);
    } finally {
      this.step = undefined;
      this.usedMs += performance.now() - started - (this.outsideMs() - outsideBefore);
    }
  }

  // The block's own errors settle its promise; what escapes a step is a timeout, the memory limit,
  // or a promise rejected elsewhere that nothing handled.
  private failedStep(error: unknown): StepResult {
    const failure = isolateErrorText(error);
    if (this.isDisposed()) return { outcome: 'memory', failure };
    if (isTimeoutText(failure)) return { outcome: 'timeout', failure };
    return { outcome: 'unhandled-rejection', failure };
  }
}
