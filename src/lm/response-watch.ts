import { ModelError } from '../errors.js';
import { formatDuration } from '../format.js';

/**
 * Watches one HTTP attempt from request to the last byte of the response: a total time limit, and
 * an idle limit (no bytes for too long). The `openai` client's own timeout stops once headers
 * arrive, so a body or stream that stalls afterwards would otherwise never end. Aborting `signal`
 * (passed to the client with the request) also ends a body being read.
 */
export class ResponseWatch {
  private readonly controller = new AbortController();
  private readonly totalTimer: NodeJS.Timeout;
  private idleTimer: NodeJS.Timeout | undefined;
  /** Set when the watch stopped the attempt: why, as a retriable ModelError. */
  failure: ModelError | undefined;
  /** Whether the body contained the SSE end marker `data: [DONE]`. */
  sawDone = false;
  /** Whether the server answered at all (a failure after this is a reply cut short). */
  headersReceived = false;
  private tail = '';

  constructor(
    private readonly limits: { totalMs: number; idleMs: number; streaming: boolean },
    /** The caller's signal: aborting it aborts the attempt too (one signal instead of AbortSignal.any per call). */
    caller?: AbortSignal,
  ) {
    if (caller?.aborted) this.controller.abort(caller.reason);
    else caller?.addEventListener('abort', () => this.controller.abort(caller.reason), { once: true, signal: this.controller.signal });
    this.totalTimer = setTimeout(() => this.stop(`no complete response within ${formatDuration(limits.totalMs)} (the request timeout)`), limits.totalMs);
    this.totalTimer.unref();
    // A non-streaming server may rightly say nothing until its whole answer is ready; a streaming
    // one sends headers and tokens as it goes, so silence from the start already counts.
    if (limits.streaming) this.touch();
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Bytes (or headers) arrived: the idle clock starts over. */
  touch(): void {
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => this.stop(`the response stalled: no data for ${formatDuration(this.limits.idleMs)} (the idle timeout)`), this.limits.idleMs);
    this.idleTimer.unref();
  }

  get streaming(): boolean {
    return this.limits.streaming;
  }

  /** Looks for the end marker across chunk boundaries. */
  observe(text: string): void {
    const window = this.tail + text;
    if (window.includes('[DONE]')) this.sawDone = true;
    this.tail = window.slice(-6);
  }

  dispose(): void {
    clearTimeout(this.totalTimer);
    clearTimeout(this.idleTimer);
    // Also drops the listener on the caller's signal (registered with this controller's signal).
    if (!this.controller.signal.aborted) this.controller.abort(new Error('the attempt has ended'));
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
 * A fetch for the `openai` client that reports headers and every chunk of the body to the
 * request's ResponseWatch (found in its init under WATCH_KEY).
 */
export async function watchedFetch(url: string | URL | Request, init?: RequestInit): Promise<Response> {
  const watch = (init as Record<string, unknown> | undefined)?.[WATCH_KEY] as ResponseWatch | undefined;
  const response = await fetch(url, init);
  if (!watch || !response.body) return response;
  watch.headersReceived = true;
  watch.touch();
  // A JSON reply is one small body: the idle clock started at its headers ends it if it stalls,
  // without piping every chunk through a stream of our own (that costs each call ~0.3 ms).
  if (!watch.streaming) return response;
  const decoder = new TextDecoder();
  const body = response.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        watch.touch();
        watch.observe(decoder.decode(chunk, { stream: true }));
        controller.enqueue(chunk);
      },
    }),
  );
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}
