import { RunFailedError, RunLimitError } from '../engine/limits.js';
import { describeError, RlmError } from '../errors.js';

type ApiErrorType = 'invalid_request_error' | 'not_found_error' | 'authentication_error' | 'rate_limit_error' | 'server_error' | 'upstream_error';

/**
 * A request the OpenAI-compatible APIs refuse, or a run it could not finish: becomes an OpenAI
 * error object `{ error: { message, type, param, code } }` with `status`.
 */
export class ApiError extends RlmError {
  override name = 'ApiError';

  constructor(
    readonly status: number,
    readonly type: ApiErrorType,
    message: string,
    readonly param: string | null = null,
    code: string = type,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(code, message);
  }

  /** The body an OpenAI client understands. */
  toJSON(): { error: Record<string, unknown> } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code, ...this.extra } };
  }
}

/**
 * Why a run failed, as an API error: the upstream model (502), a limit or an answer that never
 * matched the requested format (422, naming `formatParam`: `response_format` or `text.format`),
 * anything else (500).
 */
export function failureAsApiError(error: unknown, formatParam = 'response_format'): ApiError {
  if (error instanceof ApiError) return error;
  const partial = error instanceof RunFailedError && error.partialAnswer ? { rlm_partial_answer: error.partialAnswer } : {};
  const code = error instanceof RlmError ? error.code : 'run_failed';
  const { message } = describeError(error);
  if (error instanceof RunLimitError) return new ApiError(422, 'invalid_request_error', `The run stopped at a limit: ${message}`, null, code, partial);
  if (code === 'invalid_output') return new ApiError(422, 'invalid_request_error', `The run found no answer matching ${formatParam}: ${message}`, formatParam, code, partial);
  if (code === 'model_error') return new ApiError(502, 'upstream_error', `The upstream model failed: ${message}`, null, code, partial);
  return new ApiError(500, 'server_error', `The run failed: ${message}`, null, code, partial);
}
