import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { expect, it } from 'vitest';
import { packageRoot } from '../../src/paths.js';
import { RLM, Sandbox } from '../../src/index.js';
import { ScriptedModel } from '../../src/testing.js';
import { eventually, isReaped, isRunning, killSurvivors, workerPids, workersOnceOneSpins } from '../processes.js';
import { repl } from '../repl.js';
import { tempFolder } from '../temp-folder.js';

// A program using the library, as a user would write it: its sandbox spins in a CPU-bound block.
const PROGRAM = `
const { Sandbox } = await import(process.argv[2]);
const sandbox = await Sandbox.create({ blockTimeoutMs: 60_000 });
void sandbox.execute('while (true) {}');
console.log(sandbox.processId);
`;

it('a sandbox worker dies soon after the program using the library is killed, even mid-block', async () => {
  const script = join(tempFolder('rlm-orphans-'), 'spin.mjs');
  writeFileSync(script, PROGRAM);
  const program = spawn(process.execPath, [script, pathToFileURL(join(packageRoot(), 'dist', 'index.js')).href], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise((resolve) => program.on('exit', resolve));
  let workers: number[] = [];
  try {
    const sandboxPid = await new Promise<number>((resolve) => program.stdout.once('data', (chunk: Buffer) => resolve(Number(chunk.toString()))));
    workers = await workersOnceOneSpins(program.pid!);
    expect(workers).toContain(sandboxPid);
    program.kill('SIGKILL');
    await exited;
    expect(await eventually(() => !workers.some(isRunning), 2_000)).toBe(true);
  } finally {
    program.kill('SIGKILL');
    killSurvivors(workers);
  }
});

it('with process isolation, a disposed sandbox has no worker process left: dispose resolves once it has exited', async () => {
  const sandbox = await Sandbox.create({ memoryLimitMb: 64, isolation: 'process' });
  await sandbox.execute('const busy = 1');
  const pid = sandbox.processId!;
  expect(isRunning(pid)).toBe(true);
  await sandbox.dispose();
  expect(isReaped(pid)).toBe(true);
});

it('with process isolation, RLM.completion resolves with its sandbox worker gone, at once', async () => {
  const pidsDuringRun: number[] = [];
  const languageModel = new ScriptedModel((_request, index) => {
    if (index === 0) return repl('print(1)');
    pidsDuringRun.push(...workerPids());
    return 'FINAL(done)';
  });
  expect((await new RLM({ model: 'root', languageModel, sandbox: { isolation: 'process' } }).completion('c')).response).toBe('done');
  // The pool's spares wait for the next run; the run's own worker is gone.
  expect(pidsDuringRun.filter(isReaped)).toHaveLength(1);
});
