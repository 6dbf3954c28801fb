// Entry point of the `rlm` command: wires the process (argv, stdio, signals) to main().
import { stopWorkerProcesses } from '../sandbox/live-workers.js';
import { main } from './main.js';
import { abortOnStopSignals } from './stop-signals.js';

const interrupt = abortOnStopSignals();

// A reader that stops early (`rlm run ... | head`) closes the pipe: the output simply ends there.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
    process.exit(0);
  });
}

// A terminal or an idle pipe may never end: a stop signal ends the read instead, also one that came
// before the read began.
const readStdin = async () => {
  interrupt.throwIfAborted();
  if (process.stdin.isTTY) {
    process.stderr.write('rlm: reading the context from standard input (end with Ctrl-D)...\n');
  }
  const stopReading = () => process.stdin.destroy(interrupt.reason as Error);
  interrupt.addEventListener('abort', stopReading, { once: true });
  try {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  } finally {
    interrupt.removeEventListener('abort', stopReading);
  }
};

/** Resolves once everything written to `stream` so far has left the process (or cannot: a closed pipe). */
const drained = (stream: NodeJS.WritableStream) => new Promise<void>((resolve) => stream.write('', () => resolve()));

const code = await main(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  readStdin,
  interrupt,
});
// Once main() is done nothing else matters: a model client's retry sleep or a keep-alive socket
// left behind must not hold the exit back. Only the output must get out first, and the sandbox
// workers (spares included) must be gone: none may outlive the command.
await Promise.all([drained(process.stdout), drained(process.stderr), stopWorkerProcesses()]);
process.exit(code);
