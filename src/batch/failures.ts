import { ModelError, RlmError } from '../errors.js';

/** Codes of failures that come from the machine or the moment, not the task: another try may pass. */
const PASSING_CODES = new Set(['sandbox_start_failed', 'sandbox_worker_exited', 'sandbox_crashed']);

/**
 * Whether a task's failure may pass on another try: an upstream that kept failing after rlm's own
 * retries, a sandbox that could not start or whose process died. A client error, a limit, an
 * answer that never matched its schema would fail the same way again.
 */
export function mayPassOnRetry(failure: unknown): boolean {
  for (let error = failure; error instanceof Error; error = error.cause) {
    if (error instanceof ModelError) return error.retriable;
    if (error instanceof RlmError && PASSING_CODES.has(error.code)) return true;
  }
  return false;
}
