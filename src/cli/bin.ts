// Entry point of the `rlm` command: wires the process (argv, stdio, signals) to main().
import { main } from './main.js';
import { abortOnStopSignals } from './stop-signals.js';

const interrupt = abortOnStopSignals();

const readStdin = async () => {
  if (process.stdin.isTTY) {
    process.stderr.write('rlm: reading the context from standard input (end with Ctrl-D)...\n');
  }
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
};

const code = await main(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  readStdin,
  interrupt,
});
process.exitCode = code;
