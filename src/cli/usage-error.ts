/** A mistake in how rlm was called (flags, files, configuration): exit code 2, with what to do. */
export class UsageError extends Error {
  override name = 'UsageError';
}

export const EXIT = { ok: 0, failed: 1, usage: 2, interrupted: 130 } as const;
