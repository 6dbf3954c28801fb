// Start-up of the rlm command, whole processes timed from outside, as a user meets it: against a
// local OpenAI-compatible server that answers at once (its own process), with `node -e 0` measured
// in the same run as the floor every Node program pays.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packageRoot } from '../src/paths.js';
import { startServerProcess } from './fake-server.js';
import { median, ms, printTable, ratio } from './report.js';

const RUNS = 7;
const BIN = join(packageRoot(), 'bin', 'rlm.js');
// The root model writes one block, then answers once it has seen the block's output.
const ROOT_SOURCE = `(request) => request.body.messages.some((message) => message.role === 'user' && String(message.content).startsWith('Code executed'))
  ? { content: 'FINAL(done)', usage: { prompt_tokens: 20, completion_tokens: 2 } }
  : { content: '\\u0060\\u0060\\u0060repl\\nprint(context.length)\\n\\u0060\\u0060\\u0060', usage: { prompt_tokens: 20, completion_tokens: 8 } }`;

function timeCommand(args: string[]): number {
  const times: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    const started = performance.now();
    const result = spawnSync(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    times.push(performance.now() - started);
    if (result.status !== 0) throw new Error(`${args.join(' ')} failed: ${result.stderr.toString().slice(-500)}`);
  }
  return median(times);
}

export async function runStartupBench(): Promise<void> {
  const server = await startServerProcess(0, ROOT_SOURCE);
  const folder = mkdtempSync(join(tmpdir(), 'rlm-bench-startup-'));
  try {
    const tiny = join(folder, 'tiny.txt');
    const big = join(folder, 'big.txt');
    writeFileSync(tiny, 'tiny');
    writeFileSync(big, 'x'.repeat(100 * 2 ** 20));
    const run = (context: string, isolation = 'isolate') => [BIN, 'run', '--quiet', '--base-url', server.baseURL, '--model', 'root', '--isolation', isolation, '--context', context, 'q'];
    const node = timeCommand(['-e', '0']);
    const help = timeCommand([BIN, '--help']);
    const version = timeCommand([BIN, '--version']);
    const oneIteration = timeCommand(run(tiny));
    const bigContext = timeCommand(run(big));
    const oneIterationOwnProcess = timeCommand(run(tiny, 'process'));
    printTable(
      `rlm command start-up (whole process, median of ${RUNS}; the local server answers at once)`,
      ['figure', 'measured', 'baseline', 'ratio', 'target'],
      [
        ['rlm --help', ms(help), `node -e 0: ${ms(node)}`, ratio(help, node), '150 ms'],
        ['rlm --version', ms(version), `node -e 0: ${ms(node)}`, ratio(version, node), '150 ms'],
        ['one-iteration rlm run (tiny context, 2 model calls)', ms(oneIteration), `node -e 0: ${ms(node)}`, ratio(oneIteration, node), '300 ms'],
        ['the same run, sandbox in shared isolates vs a process of its own', ms(oneIteration), `--isolation process: ${ms(oneIterationOwnProcess)}`, ratio(oneIteration, oneIterationOwnProcess), '300 ms'],
        ['extra for a 100 MB context file', ms(bigContext - oneIteration), `tiny context run: ${ms(oneIteration)}`, ratio(bigContext, oneIteration), '+200 ms'],
      ],
    );
  } finally {
    server.close();
    rmSync(folder, { recursive: true, force: true });
  }
}
