import type { ActiveRun } from './active-run.js';
import { failureAsApiError, type ApiError } from './errors.js';
import { itemEvents, responseId, responseObject, stateOf, type ResponseEcho, type ResponseEvent, type ResponseObject, type ResponseState, type UnnumberedEvent } from './response-objects.js';
import type { RunHost } from './run-host.js';

const UNFINISHED = new Set(['queued', 'in_progress']);

/**
 * One response of the Responses API while its run works and after: its current state (what GET
 * returns) and every event it has streamed, so a stream can start from any point
 * (`starting_after`) and follow it live. It settles when the run answers, hands calls back, fails
 * or is cancelled.
 */
export class LiveResponse {
  readonly id = responseId();
  private readonly createdAt = Math.floor(Date.now() / 1000);
  private state: ResponseState;
  private readonly log: ResponseEvent[] = [];
  private wakeReaders: (() => void)[] = [];
  private readonly controller = new AbortController();
  private markSettled!: () => void;
  /** Resolves once the response has its final status. */
  readonly settled = new Promise<void>((resolve) => (this.markSettled = resolve));
  /** Why the run failed, as the error a request that waits for JSON answers with. */
  failure: ApiError | undefined;

  constructor(private readonly echo: ResponseEcho) {
    this.state = { status: echo.background ? 'queued' : 'in_progress', output: [], usage: null, error: null, rlm: null };
    this.emit({ type: 'response.created', response: this.snapshot });
    if (echo.background) this.emit({ type: 'response.queued', response: this.snapshot });
  }

  get snapshot(): ResponseObject {
    return responseObject(this.id, this.createdAt, this.echo, this.state);
  }

  get finished(): boolean {
    return !UNFINISHED.has(this.state.status);
  }

  get background(): boolean {
    return this.echo.background;
  }

  /** Waits for the run's next step and records it, with its events. */
  async follow(run: ActiveRun, runs: RunHost): Promise<void> {
    this.state = { ...this.state, status: 'in_progress' };
    this.emit({ type: 'response.in_progress', response: this.snapshot });
    try {
      const step = await runs.nextStep(run, this.controller.signal, 'text.format');
      const done = stateOf(step, run.takeUsage());
      for (const [index, item] of done.output.entries()) for (const event of itemEvents(item, index)) this.emit(event);
      this.state = done;
      this.emit({ type: 'response.completed', response: this.snapshot });
    } catch (error) {
      if (this.controller.signal.aborted) {
        // OpenAI has no event for a cancelled response: its stream just ends; GET tells the status.
        this.state = { ...this.state, status: 'cancelled' };
      } else {
        this.failure = failureAsApiError(error, 'text.format');
        this.state = { ...this.state, status: 'failed', error: { code: this.failure.code, message: this.failure.message } };
        this.emit({ type: 'response.failed', response: this.snapshot });
      }
    } finally {
      this.markSettled();
      this.wake();
    }
  }

  /** Stops the run, unless the response is finished already. */
  cancel(reason: unknown): void {
    if (!this.finished) this.controller.abort(reason);
  }

  /**
   * The events after `startingAfter` (a sequence number; -1 for all), then the live ones until the
   * response is finished, or until `signal` aborts (its reader went away: the run goes on).
   */
  async *events(startingAfter = -1, signal?: AbortSignal): AsyncGenerator<ResponseEvent> {
    let next = Math.max(0, startingAfter + 1);
    for (;;) {
      while (next < this.log.length) yield this.log[next++]!;
      if (this.finished || signal?.aborted) return;
      await new Promise<void>((resolve) => {
        const stop = () => resolve();
        signal?.addEventListener('abort', stop, { once: true });
        this.wakeReaders.push(() => {
          signal?.removeEventListener('abort', stop);
          resolve();
        });
      });
    }
  }

  private emit(event: UnnumberedEvent): void {
    this.log.push({ ...event, sequence_number: this.log.length });
    this.wake();
  }

  private wake(): void {
    const readers = this.wakeReaders;
    this.wakeReaders = [];
    for (const wake of readers) wake();
  }
}
