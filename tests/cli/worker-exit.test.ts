import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOpenAIServer, type FakeOpenAIServer, type FakeReply, type FakeRequest } from '../../src/testing.js';
import { isRunning, killSurvivors, workerPids } from '../processes.js';
import { codeThenFinal, runCli, scratchFile } from './helpers.js';
import { repl } from '../repl.js';

// A command that has ended leaves no sandbox worker behind: not the run's own, not the spare the
// pool keeps. Workers notice a dead host on their own, but only after a while (closed pipes, or
// a 200 ms poll in a busy one); a clean exit stops them first. So the check comes at once after
// the exit, with no wait that would give them time to go on their own.

let rootReply: (request: FakeRequest) => FakeReply = () => 'FINAL(unused)';
let cli: ChildProcess | undefined;
/** Every sandbox worker of the CLI seen while it ran: looked up each time the root model is asked. */
const seen = new Set<number>();
let server: FakeOpenAIServer;
beforeAll(async () => {
  server = await startFakeOpenAIServer({
    reply: (request) => {
      if (cli?.pid !== undefined) for (const pid of workerPids(cli.pid)) seen.add(pid);
      return rootReply(request);
    },
  });
});
afterAll(() => server.close());

async function runAndListWorkers(reply: (request: FakeRequest) => FakeReply, flags: string[] = []) {
  rootReply = reply;
  seen.clear();
  const context = scratchFile('worker-exit.txt', 'some text');
  const result = await runCli(['run', '--base-url', server.baseURL, '--model', 'root', '--context', context, '--quiet', ...flags, 'q'], {
    onStart: (child) => (cli = child),
  });
  const running = [...seen].filter(isRunning);
  killSurvivors(running);
  return { result, workers: [...seen], running };
}

describe('rlm run stops its sandbox workers before it exits', () => {
  it('after printing the answer', async () => {
    const { result, workers, running } = await runAndListWorkers(codeThenFinal('print("forty-two")'));
    expect(result).toMatchObject({ code: 0, stdout: 'forty-two\n' });
    expect(workers.length).toBeGreaterThan(0);
    expect(running).toEqual([]);
  });

  it('after a child run took a spare just before the end (its replacement is still starting)', async () => {
    const root = codeThenFinal('print(rlm_query("the child task"))');
    const { result, workers, running } = await runAndListWorkers(
      (request) => (JSON.stringify(request.body.messages).includes('You are a child run') ? repl('FINAL("from the child")') : root(request)),
      ['--max-depth', '2'],
    );
    expect(result).toMatchObject({ code: 0, stdout: 'from the child\n' });
    expect(workers.length).toBeGreaterThan(1);
    expect(running).toEqual([]);
  });

  it('after a failed run', async () => {
    const code = codeThenFinal('print(1)');
    const { result, workers, running } = await runAndListWorkers((request) => {
      const sawOutput = JSON.stringify(request.body.messages).includes('Code executed');
      return sawOutput ? { status: 400, error: { message: 'bad request' } } : code(request);
    });
    expect(result.code).toBe(1);
    expect(workers.length).toBeGreaterThan(0);
    expect(running).toEqual([]);
  });
});
