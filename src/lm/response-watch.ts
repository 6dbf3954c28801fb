import { ModelError } from '../errors.js';
import { formatDuration } from '../format.js';

/**
 * Watches one HTTP attempt from the moment the request is sent to the last byte of the response:
 * a total time limit, and an idle limit (no bytes for too long). The idle clock starts with the
 * request, so a server that accepts the connection and never answers is cut after the idle
 * timeout, not after the whole request timeout; it starts over at the headers and at every chunk
 * the reader reports. The `openai` client's own timeout stops once headers arrive, so a body or
 * stream that stalls afterwards would otherwise never end. Aborting `signal` (passed to the client
 * with the request) also ends a body being read.
 */
export class ResponseWatch {
  private readonly controller = new AbortController();
  private readonly totalTimer: NodeJS.Timeout;
  private idleTimer: NodeJS.Timeout | undefined;
  /** Set when the watch stopped the attempt: why, as a retriable ModelError. */
  failure: ModelError | undefined;
  /** Whether the server answered at all (a failure after this is a reply cut short). */
  headersReceived = false;

  constructor(
    private readonly limits: { totalMs: number; idleMs: number },
    /** The caller's signal: aborting it aborts the attempt too (one signal instead of AbortSignal.any per call). */
    caller?: AbortSignal,
  ) {
    if (caller?.aborted) this.controller.abort(caller.reason);
    else caller?.addEventListener('abort', () => this.controller.abort(caller.reason), { once: true, signal: this.controller.signal });
    this.totalTimer = setTimeout(() => this.stop(`no complete response within ${formatDuration(limits.totalMs)} (the request timeout)`), limits.totalMs);
    this.totalTimer.unref();
    this.touch();
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Bytes (or headers) arrived: the idle clock starts over. */
  touch(): void {
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => this.stop(this.idleReason()), this.limits.idleMs);
    this.idleTimer.unref();
  }

  dispose(): void {
    clearTimeout(this.totalTimer);
    clearTimeout(this.idleTimer);
    // Also drops the listener on the caller's signal (registered with this controller's signal).
    if (!this.controller.signal.aborted) this.controller.abort(new Error('the attempt has ended'));
  }

  private idleReason(): string {
    const limit = `${formatDuration(this.limits.idleMs)} (the idle timeout)`;
    return this.headersReceived ? `the response stalled: no data for ${limit}` : `the server did not answer: no response headers within ${limit}`;
  }

  private stop(reason: string): void {
    this.failure = new ModelError(`Model request failed: ${reason}.`, undefined, { retriable: true });
    this.controller.abort(this.failure);
    this.dispose();
  }
}

/** Where a request's ResponseWatch travels to `watchedFetch`: the client copies fetchOptions into fetch's init. */
export const WATCH_KEY = 'rlmResponseWatch';

/**
 * A fetch for the `openai` client that reports the headers to the request's ResponseWatch (found
 * in its init under WATCH_KEY). The body is read by rlm itself (see openai.ts), which reports
 * each chunk of a stream; a JSON reply is one small body, ended by the idle clock started at its
 * headers if it stalls, without piping every chunk through a stream of our own (that costs each
 * call ~0.3 ms).
 */
export async function watchedFetch(url: string | URL | Request, init?: RequestInit): Promise<Response> {
  const watch = (init as Record<string, unknown> | undefined)?.[WATCH_KEY] as ResponseWatch | undefined;
  const response = await fetch(url, init);
  if (watch) {
    watch.headersReceived = true;
    watch.touch();
  }
  return response;
}
