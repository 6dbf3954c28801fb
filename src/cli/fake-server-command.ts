import type { CommandIo } from './io.js';
import { stopRequested } from './stop-signals.js';
import { EXIT, UsageError } from './usage-error.js';

/** The flags of `rlm fake-server`, as commander parses them. */
export interface FakeServerFlags {
  port?: number;
}

/** The model name the printed example uses; the fake answers to any name. */
const FAKE_MODEL = 'fake-rlm';

/**
 * `rlm fake-server`: the scripted strategy upstream of `rlm/testing` on loopback, so a new user can
 * watch a whole run with no model, no key and no network. Serves until a stop signal.
 */
export async function fakeServerCommand(flags: FakeServerFlags, io: CommandIo): Promise<number> {
  const { rlmStrategyReply, startFakeOpenAIServer } = await import('../testing.js');
  const server = await startFakeOpenAIServer({ reply: rlmStrategyReply, port: flags.port ?? 0, models: [FAKE_MODEL] }).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'EADDRINUSE') throw error;
    throw new UsageError(`port ${flags.port} is already in use: pick another with --port, or --port 0 for any free port`);
  });
  io.stdout.write(
    [
      `rlm fake-server: a scripted OpenAI-compatible model at ${server.baseURL}`,
      'Its root model explores `context` as an RLM does (look, chunk, llm_query_batched, FINAL); its sub-model',
      'quotes the sentence of its chunk that answers the question. No model, no key, no network.',
      '',
      'In another terminal:',
      `  rlm run --base-url ${server.baseURL} --model ${FAKE_MODEL} --context README.md "How is model-written code treated?"`,
      '',
      'Ctrl-C stops it.',
      '',
    ].join('\n'),
  );
  await stopRequested(io.interrupt);
  await server.close();
  return EXIT.ok;
}
