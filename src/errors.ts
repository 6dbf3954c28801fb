/**
 * Every error rlm throws is an `RlmError` with a stable `code`. Branch on `code` (or the class),
 * never on the message: messages are written for people and say what to do next.
 */
export class RlmError extends Error {
  override name = 'RlmError';
  constructor(
    readonly code: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Invalid options or arguments given by the caller. */
export class ConfigurationError extends RlmError {
  override name = 'ConfigurationError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('configuration_error', message, options);
  }
}

/** The sandbox could not be started or used (not: model code that failed inside it). */
export class SandboxError extends RlmError {
  override name = 'SandboxError';
  constructor(code: 'sandbox_start_failed' | 'sandbox_disposed' | 'sandbox_protocol_error', message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }
}
