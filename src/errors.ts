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

/** Invalid options or arguments given by the caller, or missing configuration such as an API key. */
export class ConfigurationError extends RlmError {
  override name = 'ConfigurationError';
  constructor(message: string, options?: { cause?: unknown; code?: 'configuration_error' | 'missing_api_key' }) {
    super(options?.code ?? 'configuration_error', message, options);
  }
}

/** The sandbox could not be started or used (not: model code that failed inside it). */
export class SandboxError extends RlmError {
  override name = 'SandboxError';
  constructor(
    code: 'sandbox_start_failed' | 'sandbox_disposed' | 'sandbox_protocol_error' | 'sandbox_setup_failed' | 'sandbox_load_failed' | 'sandbox_crashed',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(code, message, options);
  }
}

/** A model call failed (after retries where they help): HTTP errors, timeouts, malformed or empty replies. */
export class ModelError extends RlmError {
  override name = 'ModelError';
  /** Whether trying the same request again may succeed (a 429, a 5xx, a timeout, a cut stream). */
  readonly retriable: boolean;
  /** How long the server asked to wait before trying again. */
  readonly retryAfterMs: number | undefined;

  constructor(
    message: string,
    readonly status: number | undefined,
    options: { cause?: unknown; retriable?: boolean; retryAfterMs?: number | undefined } = {},
  ) {
    super('model_error', message, options);
    this.retriable = options.retriable ?? false;
    this.retryAfterMs = options.retryAfterMs;
  }
}

/** A host tool called from model code failed; model code can catch it. */
export class ToolError extends RlmError {
  override name = 'ToolError';
  constructor(message: string) {
    super('tool_error', message);
  }
}

/** The tool-calling loop asked the model too many times without getting an answer. */
export class ToolLoopError extends RlmError {
  override name = 'ToolLoopError';
  constructor(message: string) {
    super('tool_loop_error', message);
  }
}

/** A sub-call's answer does not match the schema model code gave, even after one retry; model code can catch it. */
export class OutputMismatchError extends RlmError {
  override name = 'OutputMismatchError';
  constructor(message: string) {
    super('invalid_output', message);
  }
}

/**
 * A call from model code the host refuses (too large a batch, an unknown tool loop). It reaches
 * model code as an error it can catch, under `name` (RangeError, TypeError, Error).
 */
export class HostCallError extends RlmError {
  constructor(name: 'Error' | 'RangeError' | 'TypeError', message: string) {
    super('host_call_refused', message);
    this.name = name;
  }
}

/** rlm itself is broken or incomplete (a missing built file or prompt): reinstall or rebuild. */
export class InstallationError extends RlmError {
  override name = 'InstallationError';
  constructor(message: string) {
    super('installation_error', message);
  }
}

/** The name and message of anything thrown, for reports that cross a boundary as plain data. */
export function describeError(error: unknown): { name: string; message: string } {
  if (error instanceof Error) return { name: error.name, message: error.message };
  if (error !== null && typeof error === 'object' && typeof (error as { message?: unknown }).message === 'string') {
    return { name: 'Error', message: (error as { message: string }).message };
  }
  return { name: 'Error', message: String(error) };
}
