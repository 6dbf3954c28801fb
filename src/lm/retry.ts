import { DEFAULTS } from '../defaults.js';

/**
 * How long to wait before retry number `attempt` (0 for the first retry): the server's
 * retry-after when it gave one, else exponential backoff with jitter; never more than `maxMs`.
 */
export function retryDelayMs(attempt: number, retryAfterMs: number | undefined, maxMs: number = DEFAULTS.lm.maxRetryDelayMs): number {
  const backoff = Math.min(8_000, 500 * 2 ** attempt) * (0.75 + Math.random() / 2);
  return Math.min(maxMs, retryAfterMs ?? backoff);
}

/** Reads `retry-after-ms` or `retry-after` (seconds or an HTTP date) from response headers. */
export function retryAfterMs(headers: Headers | undefined): number | undefined {
  const milliseconds = Number(headers?.get('retry-after-ms'));
  if (headers?.get('retry-after-ms') && Number.isFinite(milliseconds) && milliseconds >= 0) return milliseconds;
  const value = headers?.get('retry-after');
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

/** Resolves after `ms`, or rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason as Error);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
