// Entry point of the `rlm` command: wires the process (argv, stdio, signals) to main().
import { main } from './main.js';

const interrupt = new AbortController();
let interrupts = 0;
process.on('SIGINT', () => {
  interrupts += 1;
  // The first Ctrl-C stops the run cleanly (sandboxes stopped, log flushed); a second one does not wait.
  if (interrupts > 1) process.exit(130);
  interrupt.abort(new Error('interrupted'));
});

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
  interrupt: interrupt.signal,
});
process.exitCode = code;
