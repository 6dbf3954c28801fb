import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/paths.js';
import { needleTask } from '../../src/testing.js';
import { BIN, runCli, scratch, scratchFile } from './helpers.js';

const children: ReturnType<typeof spawn>[] = [];
afterAll(() => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
});

/** Starts `rlm fake-server`; resolves with its stdout once it printed the line to paste. */
async function startFakeServer(args: string[] = []) {
  const child = spawn(process.execPath, [BIN, 'fake-server', ...args], { env: { PATH: process.env.PATH ?? '', HOME: scratch }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const runLine = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const line = /^\s*(rlm run --base-url \S+ --model \S+)/m.exec(stdout);
      if (line) resolve(line[1]!);
    });
    void exited.then(() => reject(new Error(`rlm fake-server exited: ${stderr}`)));
  });
  return { child, runLine, exited, stdout: () => stdout, stderr: () => stderr };
}

describe('rlm fake-server', () => {
  it('serves a scripted upstream that a real rlm run gets the right answer from, and stops on SIGINT with 0', async () => {
    const server = await startFakeServer();
    expect(server.stdout()).toMatch(/a scripted OpenAI-compatible model at http:\/\/127\.0\.0\.1:\d+\/v1/);
    const [, baseURL, model] = /--base-url (\S+) --model (\S+)/.exec(server.runLine)!;
    const task = needleTask(42, 400);
    const result = await runCli(['run', '--base-url', baseURL!, '--model', model!, '--context', scratchFile('needle.txt', task.context), task.question]);
    expect(result.stderr).not.toMatch(/error/i);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(task.answer);
    server.child.kill('SIGINT');
    expect(await server.exited).toBe(0);
    expect(server.stderr()).toBe('');
  });

  it('answers the README quickstart as the README says: one sentence of the README', async () => {
    const server = await startFakeServer();
    const [, baseURL, model] = /--base-url (\S+) --model (\S+)/.exec(server.runLine)!;
    const readme = join(packageRoot(), 'README.md');
    const result = await runCli(['run', '--base-url', baseURL!, '--model', model!, '--context', readme, 'How is model-written code treated?']);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('Model-written code is treated as hostile.\n');
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
  });

  it('stops on SIGTERM with 0, and says when its port is taken', async () => {
    const first = await startFakeServer();
    const port = /127\.0\.0\.1:(\d+)/.exec(first.runLine)![1]!;
    const taken = await runCli(['fake-server', '--port', port]);
    expect(taken.code).toBe(2);
    expect(taken.stderr).toContain(`port ${port} is already in use`);
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
  });
});
