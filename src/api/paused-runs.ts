import { formatDuration } from '../format.js';
import type { ActiveRun } from './active-run.js';
import { ApiError } from './errors.js';
import { CHAT_TOOL_RESULTS, type ToolResultWording } from './tool-results.js';

/** Calls `expire` once `ms` have passed, unless the function it returns is called first. */
export type ExpiryTimer = (expire: () => void, ms: number) => () => void;

/** A real timer that does not keep the process alive. */
export const realTimer: ExpiryTimer = (expire, ms) => {
  const timer = setTimeout(expire, ms);
  timer.unref();
  return () => clearTimeout(timer);
};

interface PausedRunsOptions {
  ttlMs: number;
  max: number;
  /** Internal, for tests: a clock they advance by hand instead of waiting out the TTL. @default real timers */
  startTimer?: ExpiryTimer;
}

/**
 * Runs waiting for their caller's tool results, found by the ids of the calls they handed back.
 * A run not resumed within `ttlMs` is cancelled (its sandbox stopped); past `max` paused runs the
 * oldest is. Paused runs live in this process only: several server replicas need sticky routing.
 */
export class PausedRuns {
  private readonly byCallId = new Map<string, ActiveRun>();
  /** In the order they paused, oldest first, with how to cancel their expiry. */
  private readonly timers = new Map<ActiveRun, () => void>();
  private readonly startTimer: ExpiryTimer;

  constructor(private readonly limits: PausedRunsOptions) {
    this.startTimer = limits.startTimer ?? realTimer;
  }

  get size(): number {
    return this.timers.size;
  }

  keep(run: ActiveRun): void {
    while (this.timers.size >= this.limits.max) {
      const oldest = this.timers.keys().next().value!;
      this.drop(oldest, new Error('too many paused runs: the oldest was stopped'));
    }
    const cancelExpiry = this.startTimer(() => this.drop(run, new Error(`no tool results within ${formatDuration(this.limits.ttlMs)}`)), this.limits.ttlMs);
    this.timers.set(run, cancelExpiry);
    for (const id of run.pendingCallIds) this.byCallId.set(id, run);
  }

  /** The run waiting for these tool call ids, removed from the store; a 404 when there is none. */
  take(callIds: string[], wording: ToolResultWording = CHAT_TOOL_RESULTS): ActiveRun {
    const run = this.byCallId.get(callIds[0]!);
    if (!run) {
      throw new ApiError(
        404,
        'not_found_error',
        `No paused run is waiting for tool call ${callIds[0]}: it expired (paused runs are kept ${formatDuration(this.limits.ttlMs)}), was stopped, ` +
          `or never existed. ${wording.startOver}`,
        wording.param,
        'tool_call_not_found',
      );
    }
    const foreign = callIds.find((id) => this.byCallId.get(id) !== run);
    if (foreign) throw new ApiError(400, 'invalid_request_error', `Tool result ${foreign} belongs to no call of this run.`, wording.param, 'tool_call_not_found');
    this.forget(run);
    return run;
  }

  /** Cancels every paused run (the server is shutting down). */
  closeAll(reason: unknown): void {
    for (const run of [...this.timers.keys()]) this.drop(run, reason);
  }

  private drop(run: ActiveRun, reason: unknown): void {
    this.forget(run);
    run.cancel(reason);
  }

  private forget(run: ActiveRun): void {
    this.timers.get(run)?.();
    this.timers.delete(run);
    for (const [id, owner] of this.byCallId) if (owner === run) this.byCallId.delete(id);
  }
}
