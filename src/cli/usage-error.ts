import { RlmError } from '../errors.js';

/** A mistake in how rlm was called (flags, files, configuration): exit code 2, with what to do. */
export class UsageError extends RlmError {
  override name = 'UsageError';
  constructor(message: string) {
    super('usage_error', message);
  }
}

export const EXIT = { ok: 0, failed: 1, usage: 2, interrupted: 130, terminated: 143 } as const;

const CONFIGURATION_CODES = new Set(['configuration_error', 'missing_api_key', 'usage_error']);

/** An error that means rlm was called or configured wrongly (exit code 2), not that a run failed. */
export function isConfigurationProblem(error: unknown): error is RlmError {
  return error instanceof RlmError && CONFIGURATION_CODES.has(error.code);
}
