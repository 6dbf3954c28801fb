import type { AddressInfo } from 'node:net';
import { ChatCompletions, splitModelName } from '../api/chat-completions.js';
import { Responses } from '../api/responses.js';
import { ApiError } from '../api/errors.js';
import { DEFAULTS } from '../defaults.js';
import { RLM, type RLMOptions } from '../engine/rlm.js';
import { ConfigurationError } from '../errors.js';
import { resolveModelProvider, type ModelProvider } from '../lm/provider.js';

export interface ServeOptions {
  /** @default '127.0.0.1' */
  host?: string;
  /** @default 8431 */
  port?: number;
  /** Options of every run; the model names come from each request (`root:sub` or one name). */
  run: Omit<RLMOptions, 'model' | 'subModel'>;
  /** Clients must send `Authorization: Bearer <token>`; required on a non-loopback address. */
  authToken?: string | undefined;
  /** @default 268435456 (256 MiB): room for a 100 MB context, escaped as JSON */
  maxBodyBytes?: number;
  /** @default 32 */
  maxConcurrentRuns?: number;
  /** @default 600000 */
  pausedRunTtlMs?: number;
  /** @default 15000 */
  keepAliveMs?: number;
  /** How long a finished response of the Responses API stays readable by id. @default 3600000 */
  responseTtlMs?: number;
}

export interface RunningServer {
  /** e.g. `http://127.0.0.1:8000` */
  url: string;
  /**
   * Stops accepting connections, lets requests in progress and background runs finish for up to
   * `graceMs`, then stops every run (paused ones included) and closes what is left.
   */
  close(graceMs?: number): Promise<void>;
}

/**
 * Serves RLM as an OpenAI-compatible model: chat completions and the Responses API (see
 * ChatCompletions and Responses for what a request means).
 *
 * @example
 * const server = await serve({ port: 8431, run: { baseURL: 'http://localhost:11434/v1' } });
 * // POST http://127.0.0.1:8431/v1/chat/completions { "model": "qwen2.5:7b", "messages": [...] }
 */
export async function serve(options: ServeOptions): Promise<RunningServer> {
  const host = options.host ?? DEFAULTS.server.host;
  if (!options.authToken && !listensOnLoopbackOnly(host)) {
    throw new ConfigurationError(
      `Refusing to serve on ${host} without a token: anyone who can reach it could run models on your key and code in its sandboxes. ` +
        'Set --auth-token (or RLM_AUTH_TOKEN), or bind to 127.0.0.1.',
    );
  }
  const provider = resolveModelProvider(options.run);
  const models = new UpstreamModels(provider);
  const runHost = {
    rlmFor: rlmCache(options.run, provider),
    resolveModels: async (name: string, sub: string | undefined) => splitModelName(name, sub, await models.list()),
    pausedRunTtlMs: options.pausedRunTtlMs ?? DEFAULTS.server.pausedRunTtlMs,
  };
  const completions = new ChatCompletions(runHost);
  const responses = new Responses({ ...runHost, responseTtlMs: options.responseTtlMs ?? DEFAULTS.server.responseTtlMs });
  // The HTTP stack loads only when a server starts: other uses of the library never pay for it.
  const [{ createApp }, { serve: serveNode }] = await Promise.all([import('./app.js'), import('@hono/node-server')]);
  const app = createApp({
    completions,
    responses,
    listModels: async () => [...(await models.listOrFail())],
    authToken: options.authToken,
    maxBodyBytes: options.maxBodyBytes ?? DEFAULTS.server.maxBodyBytes,
    maxConcurrentRuns: options.maxConcurrentRuns ?? DEFAULTS.server.maxConcurrentRuns,
    keepAliveMs: options.keepAliveMs ?? DEFAULTS.server.keepAliveMs,
  });
  const port = options.port ?? DEFAULTS.server.port;
  const server = await new Promise<import('node:http').Server>((resolve, reject) => {
    const started = serveNode({ fetch: app.fetch, hostname: host, port }, () => resolve(started as import('node:http').Server)) as import('node:http').Server;
    started.once('error', (error: NodeJS.ErrnoException) => {
      reject(error.code === 'EADDRINUSE' ? new ConfigurationError(`port ${port} is in use; pick one with --port (serve({ port }) in a program)`, { cause: error }) : error);
    });
  });
  const { port: listening } = server.address() as AddressInfo;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${listening}`,
    close: (graceMs = DEFAULTS.server.shutdownGraceMs) => closeGracefully(server, [completions, responses], graceMs),
  };
}

/** 0.0.0.0 and :: listen on every interface; only these stay on this machine. */
function listensOnLoopbackOnly(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** One RLM per root and sub model pair, so setup files load once, not per request. */
function rlmCache(run: ServeOptions['run'], provider: ModelProvider): (models: { root: string; sub: string }) => RLM {
  const cache = new Map<string, RLM>();
  return ({ root, sub }) => {
    const key = `${root}\u0000${sub}`;
    let rlm = cache.get(key);
    if (!rlm) {
      rlm = new RLM({ ...run, model: root, subModel: sub, provider, languageModel: undefined });
      cache.set(key, rlm);
    }
    return rlm;
  };
}

/** The upstream's model ids (its /v1/models), asked once and kept once it has listed some. */
class UpstreamModels {
  private known: Promise<ReadonlySet<string>> | undefined;

  constructor(private readonly provider: ModelProvider) {}

  /** The ids, or none when the upstream does not list them: model names are then taken as they are. */
  list(): Promise<ReadonlySet<string>> {
    return this.listOrFail().catch(() => new Set<string>());
  }

  /** The ids; an upstream that does not list them is a 502 that says why (an empty list would hide it). */
  listOrFail(): Promise<ReadonlySet<string>> {
    this.known ??= this.fetch().then(
      (ids) => {
        if (ids.size === 0) this.known = undefined; // ask again next time
        return ids;
      },
      (error: unknown) => {
        this.known = undefined;
        throw error;
      },
    );
    return this.known;
  }

  private async fetch(): Promise<ReadonlySet<string>> {
    const { baseURL, secrets } = this.provider;
    if (!baseURL) return new Set();
    const url = `${baseURL.replace(/\/+$/, '')}/models`;
    const unavailable = (reason: string) => new ApiError(502, 'upstream_error', `The upstream model server did not list its models (${url}): ${reason}.`, null, 'upstream_error');
    let response: Response;
    try {
      const key = secrets?.[0];
      response = await fetch(url, { headers: key ? { authorization: `Bearer ${key}` } : {}, signal: AbortSignal.timeout(5_000) });
    } catch (error) {
      const cause = (error as { cause?: { code?: string } }).cause?.code;
      throw unavailable(cause === 'ECONNREFUSED' ? 'connection refused (is it running?)' : (error as Error).message);
    }
    if (!response.ok) throw unavailable(`HTTP ${response.status}`);
    const body = (await response.json().catch(() => undefined)) as { data?: unknown } | undefined;
    if (!Array.isArray(body?.data)) throw unavailable('its reply is not a model list');
    return new Set((body.data as { id?: unknown }[]).flatMap((model) => (typeof model?.id === 'string' ? [model.id] : [])));
  }
}

/** Requests in progress and background runs may finish within `graceMs`; then every run is stopped. */
async function closeGracefully(server: import('node:http').Server, apis: [ChatCompletions, Responses], graceMs: number): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  const grace = new Promise<void>((resolve) => setTimeout(resolve, graceMs).unref());
  await Promise.race([Promise.all([closed, apis[1].idle()]), grace]);
  for (const api of apis) api.close();
  server.closeAllConnections();
  await closed;
}
