import { serve, type RunningServer } from '../index.js';
import { useLocalServer, type CommandIo } from './run-command.js';
import { runOptionsFromFlags, type RunOptionFlags } from './run-options.js';
import { EXIT } from './usage-error.js';

/** The flags of `rlm serve`, as commander parses them. */
export interface ServeFlags extends RunOptionFlags {
  host?: string;
  port?: number;
  authToken?: string;
  maxConcurrentRuns?: number;
  maxBodyMb?: number;
  pausedRunTtl?: number;
}

export const SERVE_EXAMPLES = `
Examples:
  $ rlm serve --base-url http://localhost:11434/v1
  $ curl http://127.0.0.1:8000/v1/chat/completions -H 'content-type: application/json' \\
      -d '{"model": "qwen2.5:7b", "messages": [{"role": "system", "content": "<a huge document>"},
           {"role": "user", "content": "Who signed it?"}]}'
  $ RLM_AUTH_TOKEN=secret rlm serve --host 0.0.0.0 --port 8080 --max-budget 1 --price my-model=0.2,0.8

A request's model "root:sub" picks the root and sub models; a plain name is used for both (names
the upstream lists whole, like "qwen2.5:7b", are never split; "rlm_sub_model" in the body also
names the sub model). The last user message is the question; the system messages and earlier turns
(or "rlm_context" in the body) are the context. Tools in the request are the caller's: their calls
come back as tool_calls, and the request with the results resumes the run.

Stop with Ctrl-C or SIGTERM: requests in progress get 30 s to finish, then every run is stopped.`;

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
  });
  io.stderr.write(`rlm: serving an OpenAI-compatible API at ${server.url}/v1 (upstream: ${run.baseURL ?? 'OpenAI'})\n`);
  await stopRequested(io.interrupt);
  return shutDown(server, io);
}

function stopRequested(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

async function shutDown(server: RunningServer, io: CommandIo): Promise<number> {
  io.stderr.write('rlm: shutting down: no new requests; those in progress may finish (30 s at most).\n');
  await server.close();
  io.stderr.write('rlm: stopped.\n');
  return EXIT.ok;
}
