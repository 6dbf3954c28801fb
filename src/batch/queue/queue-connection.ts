import type { ConnectionOptions } from 'bullmq';
import { ConfigurationError } from '../../errors.js';

/** Where a batch's queue lives: a Redis URL and the batch's name on it. */
export interface QueueAddress {
  /** redis://[USER:PASSWORD@]HOST:PORT[/DB] or rediss:// for TLS. */
  url: string;
  /** The batch: workers and the coordinator meet on it. */
  name: string;
}

/** BullMQ's key prefix: rlm's queues sit apart from other BullMQ users of the same Redis. */
export const KEY_PREFIX = 'rlm';

// Letters, digits and . _ - only: the name becomes part of Redis keys, where ':' separates parts.
const BATCH_NAME = /^[A-Za-z0-9._-]{1,100}$/;

/** Refuses a batch name that cannot be part of a Redis key, saying what may be used. */
export function checkBatchName(name: string): string {
  if (!BATCH_NAME.test(name)) {
    throw new ConfigurationError(`--name ${JSON.stringify(name)}: a batch name is 1 to 100 letters, digits, '.', '_' or '-'.`);
  }
  return name;
}

/**
 * The connection options of a Redis URL. BullMQ's workers need `maxRetriesPerRequest: null`: a
 * blocking fetch must wait through a Redis restart instead of failing the worker.
 */
export function connectionOptions(url: string): ConnectionOptions {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw queueUrlError(url);
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') throw queueUrlError(url);
  const db = parsed.pathname.replace(/^\//, '');
  if (db !== '' && !/^\d+$/.test(db)) throw queueUrlError(url);
  return {
    host: parsed.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1',
    port: parsed.port ? Number(parsed.port) : 6379,
    ...(parsed.username && { username: decodeURIComponent(parsed.username) }),
    ...(parsed.password && { password: decodeURIComponent(parsed.password) }),
    ...(db !== '' && { db: Number(db) }),
    ...(parsed.protocol === 'rediss:' && { tls: { servername: parsed.hostname } }),
    maxRetriesPerRequest: null,
  };
}

/** The URL as it may be printed: without its password. */
export function displayUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(not a URL)';
  }
}

function queueUrlError(url: string): ConfigurationError {
  return new ConfigurationError(
    `--queue ${displayUrl(url)} is not a Redis URL: write redis://HOST:PORT[/DB], with redis://:PASSWORD@HOST:PORT for a password and rediss:// for TLS.`,
  );
}

/**
 * Waits until Redis answers on a BullMQ queue or worker; refuses with advice after `timeoutMs`
 * (the client itself retries for ever, which suits a worker riding out a Redis restart, not a
 * command started with a mistyped URL). Connection errors meanwhile are kept for the message.
 */
export async function reachable(handle: { waitUntilReady(): Promise<unknown>; on(event: 'error', listener: (error: Error) => void): unknown }, url: string, timeoutMs: number): Promise<void> {
  let lastError: Error | undefined;
  handle.on('error', (error) => (lastError = error));
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const reason = lastError ? ` (${lastError.message})` : '';
      reject(new ConfigurationError(`Cannot reach Redis at ${displayUrl(url)} within ${timeoutMs / 1000} s${reason}: check the host, port and password in --queue, and that redis-server runs.`));
    }, timeoutMs);
  });
  try {
    await Promise.race([handle.waitUntilReady(), timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Closes a queue's or worker's connections. One that never connected would wait for Redis for ever
 * (and its promise never settles, so it is not awaited): it is dropped after two seconds.
 */
export async function closeQueue(queue: { close(): Promise<void>; disconnect(): Promise<void> }): Promise<void> {
  const closed = await Promise.race([queue.close().then(() => true), new Promise<false>((resolve) => setTimeout(() => resolve(false), 2_000))]);
  if (!closed) void queue.disconnect().catch(() => undefined);
}
