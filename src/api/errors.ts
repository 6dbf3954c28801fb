import { RlmError } from '../errors.js';

type ApiErrorType = 'invalid_request_error' | 'not_found_error' | 'authentication_error' | 'rate_limit_error' | 'server_error' | 'upstream_error';

/**
 * A request the chat-completions API refuses, or a run it could not finish: becomes an OpenAI
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
