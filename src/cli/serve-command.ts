import { serve, type RunningServer } from '../index.js';
import type { CommandIo } from './io.js';
import { useLocalServer } from './run-command.js';
import { runOptionsFromFlags, type RunOptionFlags } from './run-options.js';
import { stopRequested } from './stop-signals.js';
import { EXIT } from './usage-error.js';

/** The flags of `rlm serve`, as commander parses them. */
export interface ServeFlags extends RunOptionFlags {
  host?: string;
  port?: number;
  authToken?: string;
  maxConcurrentRuns?: number;
  maxBodyMb?: number;
  pausedRunTtl?: number;
  responseTtl?: number;
}

/** `rlm serve`: serves until a stop signal, then shuts down gracefully. */
export async function serveCommand(flags: ServeFlags, io: CommandIo): Promise<number> {
  const run = runOptionsFromFlags(flags, io.env);
  if (!run.baseURL && !run.apiKey) run.baseURL = (await useLocalServer(io, undefined)).baseURL;
  const server = await serve({
    run,
    ...(flags.host && { host: flags.host }),
    ...(flags.port !== undefined && { port: flags.port }),
    authToken: flags.authToken ?? io.env.RLM_AUTH_TOKEN,
    ...(flags.maxConcurrentRuns && { maxConcurrentRuns: flags.maxConcurrentRuns }),
    ...(flags.maxBodyMb && { maxBodyBytes: Math.round(flags.maxBodyMb * 2 ** 20) }),
    ...(flags.pausedRunTtl && { pausedRunTtlMs: Math.round(flags.pausedRunTtl * 1000) }),
    ...(flags.responseTtl && { responseTtlMs: Math.round(flags.responseTtl * 1000) }),
  });
  io.stderr.write(`rlm: serving an OpenAI-compatible API at ${server.url}/v1 (upstream: ${run.baseURL ?? 'OpenAI'})\n`);
  await stopRequested(io.interrupt);
  return shutDown(server, io);
}

async function shutDown(server: RunningServer, io: CommandIo): Promise<number> {
  io.stderr.write('rlm: shutting down: no new requests; those in progress may finish (30 s at most).\n');
  await server.close();
  io.stderr.write('rlm: stopped.\n');
  return EXIT.ok;
}
