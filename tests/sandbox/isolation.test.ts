// Runs that share a worker process (the default isolation): nothing of one reaches another, a crash
// of the process ends its runs clearly and the pool goes on, worn processes are recycled.
import { availableParallelism } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { RLM, type HostCall, type Sandbox } from '../../src/index.js';
import { workerPool } from '../../src/sandbox/pool.js';
import { ScriptedModel } from '../../src/testing.js';
import { eventually, isRunning } from '../processes.js';
import { repl } from '../repl.js';
import { createSandbox, inIsolation, ISOLATIONS } from './helpers.js';

const promptOf = (call: HostCall) => ('prompt' in call ? String(call.prompt) : call.kind);
const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// Everything a run could try to reach another run through: shared built-ins and prototypes, the
// global object, errors and their stacks, promises (the isolate has no timers), and the channel.
const HOSTILE = `
Object.prototype.polluted = 'yes';
Array.prototype.map = function () { return ['hijacked'] };
Array.prototype.join = function () { return 'hijacked' };
JSON.stringify = () => 'hijacked';
Object.keys = () => ['hijacked'];
String.prototype.includes = () => true;
Function.prototype.toString = () => 'hijacked';
Error.prepareStackTrace = () => 'hijacked stack';
Error.captureStackTrace = () => {};
Promise.prototype.then = function () { throw new Error('hijacked then') };
globalThis.context = 'planted';
globalThis.mine = 'planted';
var looking = Object.getOwnPropertyNames(globalThis).filter((name) => /mine|answer|secret|victim/.test(name));
print('sees:', looking.length, typeof answer, llm_query('hostile question'));
`;

// What the victim checks after the hostile run did its worst: every built-in it uses, its own
// globals, its context, its errors.
const VICTIM_CHECK = `
let stack;
try { null.x } catch (error) { stack = error.stack.split('\\n')[0] }
print(answer, mine, context, [1, 2].map((x) => x * 2).join('+'), JSON.stringify({ a: 1 }), Object.keys({ b: 1 }).join(), 'abc'.includes('z'), typeof ({}).polluted, stack)
`;
const VICTIM_OUTPUT = 'victim answer victim variable victim secret 2+4 {"a":1} b false undefined TypeError: Cannot read properties of null (reading \'x\')\n';

describe('two runs in one worker process', () => {
  it('cannot reach each other, while one waits mid-block and the other attacks', async () => {
    const victimCalls: string[] = [];
    const hostileCalls: string[] = [];
    let releaseVictim!: (answer: string) => void;
    const victim = await createSandbox({
      onHostCall: (call) => {
        victimCalls.push(promptOf(call));
        return new Promise((resolve) => (releaseVictim = resolve));
      },
    });
    const hostile = await createSandbox({ onHostCall: (call) => (hostileCalls.push(promptOf(call)), 'hostile answer') });
    expect(hostile.processId).toBe(victim.processId);
    await victim.setContext('victim secret');
    await victim.execute('var mine = "victim variable"');

    // The victim is mid-block, waiting for its host call, while the hostile run does its worst.
    const victimBlock = victim.execute(`const answer = llm_query('victim question'); ${VICTIM_CHECK}`);
    await eventually(() => victimCalls.length === 1, 5_000);
    const attack = await hostile.execute(HOSTILE);
    expect(attack.error).toBeUndefined();
    expect(attack.stdout).toBe('sees: 1 undefined hostile answer\n'); // only its own planted `mine`
    releaseVictim('victim answer');

    expect((await victimBlock).stdout).toBe(VICTIM_OUTPUT);
    expect(victimCalls).toEqual(['victim question']);
    expect(hostileCalls).toEqual(['hostile question']);
    // And in a later block, after the hostile run's state has settled.
    expect((await victim.execute('print(typeof Object.prototype.polluted, Error.prepareStackTrace === undefined, [3].map(String).join())')).stdout).toBe('undefined true 3\n');
  });

  it('keep their output, errors and final answers apart when their blocks interleave', async () => {
    const runs = await Promise.all(['left', 'right'].map((name) => createSandbox({ onHostCall: async () => (await delay(20), name) })));
    const results = await Promise.all(
      runs.map((run, index) => run.execute(`for (let i = 0; i < 5; i++) print(llm_query('x'), ${index}, i); FINAL('from ' + llm_query('x')); throw new RangeError('mine ${index}')`)),
    );
    results.forEach((result, index) => {
      const name = index === 0 ? 'left' : 'right';
      expect(result.stdout).toBe(Array.from({ length: 5 }, (_, i) => `${name} ${index} ${i}\n`).join(''));
      expect(result.final).toBe(`from ${name}`);
      expect(result.error).toMatchObject({ name: 'RangeError', message: `mine ${index}` });
    });
  });
});

describe('fifty concurrent runs sharing worker processes', () => {
  it('each sees only its own context, calls and answers, with hostile runs among them', async () => {
    const count = 50;
    const callsOf: string[][] = Array.from({ length: count }, () => []);
    const sandboxes = await Promise.all(
      callsOf.map((calls, index) =>
        createSandbox({
          memoryLimitMb: 32,
          blockTimeoutMs: 20_000,
          onHostCall: async (call) => {
            calls.push(promptOf(call));
            await delay((index * 7) % 30); // answers come back in an order unlike the calls'
            return `answer ${index}`;
          },
        }),
      ),
    );
    await Promise.all(sandboxes.map((sandbox, index) => sandbox.setContext(`secret ${index}`)));
    const processes = new Set(sandboxes.map((sandbox) => sandbox.processId));
    expect(processes.size).toBeLessThanOrEqual(Math.min(availableParallelism(), 8));

    const results = await Promise.all(
      sandboxes.map((sandbox, index) =>
        index % 2 === 1
          ? sandbox.execute(`${HOSTILE}; print(context)`)
          : sandbox.execute(`var mine = 'victim variable'; const answer = llm_query('question ${index}'); print(answer, context, [1, 2].map((x) => x * 2).join('+'), typeof ({}).polluted)`),
      ),
    );
    results.forEach((result, index) => {
      expect(result.error, `run ${index}`).toBeUndefined();
      if (index % 2 === 1) {
        expect(result.stdout).toBe(`sees: 1 undefined answer ${index}\nplanted\n`); // its own planted `mine`
        expect(callsOf[index]).toEqual(['hostile question']);
      } else {
        expect(result.stdout).toBe(`answer ${index} secret ${index} 2+4 undefined\n`);
        expect(callsOf[index]).toEqual([`question ${index}`]);
      }
    });
  }, 60_000);
});

/** Sandboxes until `count` share the process of the first (the pool spreads runs over its processes), and the others made meanwhile. */
async function sandboxesInOneProcess(count: number, options: Parameters<typeof createSandbox>[0]): Promise<Sandbox[] & { elsewhere: Sandbox[] }> {
  const all: Sandbox[] = [];
  while (all.filter((each) => each.processId === all[0]!.processId).length < count) all.push(await createSandbox(options));
  const shared = all.filter((each) => each.processId === all[0]!.processId);
  return Object.assign(shared, { elsewhere: all.filter((each) => each.processId !== all[0]!.processId) });
}

describe('a crash of a shared worker process', () => {
  it('ends every run it hosts with the cause, whether mid-block or idle; the pool replaces the process', async () => {
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => (release = resolve));
    const [waiting, computing, idle] = await sandboxesInOneProcess(3, { blockTimeoutMs: 20_000, onHostCall: async () => (await released, 'late') });
    const crashed = waiting!.processId!;
    await Promise.all([waiting, computing, idle].map((sandbox) => sandbox!.execute('var kept = "before"')));

    const blocks = [waiting!.execute('print(llm_query("slow"))'), computing!.execute('const until = Date.now() + 15_000; while (Date.now() < until) {}')];
    await delay(200); // both blocks are under way
    process.kill(crashed, 'SIGKILL'); // what V8's fatal out-of-memory path does to the process
    const results = await Promise.all(blocks);
    release();

    for (const result of results) {
      expect(result.reset).toBe(true);
      expect(result.error).toMatchObject({ name: 'SandboxCrashedError', message: expect.stringMatching(/stopped while running the block \(the process was killed .*hosted \d+ runs/) });
    }
    const idleAfter = await idle!.execute('print(typeof kept)');
    expect(idleAfter.error).toMatchObject({ name: 'SandboxCrashedError', message: expect.stringContaining('stopped between blocks') });
    for (const sandbox of [waiting!, computing!, idle!]) {
      expect((await sandbox.execute('print(typeof kept, "fresh")')).stdout).toBe('undefined fresh\n');
      expect(sandbox.processId).not.toBe(crashed);
    }
    expect(workerPool.sharedProcessIds).not.toContain(crashed);
    expect((await (await createSandbox()).execute('print("pool goes on")')).stdout).toBe('pool goes on\n');
  }, 30_000);

  it('from a catastrophic allocation: the runs mid-block in it fail clearly or finish, none hangs, runs elsewhere go on', async () => {
    const hosts = await sandboxesInOneProcess(3, { memoryLimitMb: 64, blockTimeoutMs: 8_000, onHostCall: async () => (await delay(1_500), 'answered') });
    const [culprit, ...bystanders] = hosts;
    const elsewhere = hosts.elsewhere.length > 0 ? hosts.elsewhere : [await createSandbox({ isolation: 'process' })];
    await Promise.all(elsewhere.map((sandbox) => sandbox.execute('var untouched = "kept"')));
    const started = performance.now();
    const bystanderBlocks = bystanders.map((sandbox, index) =>
      sandbox.execute(index === 0 ? 'print(llm_query("slow"))' : 'let n = 0; const until = Date.now() + 1_500; while (Date.now() < until) n++; print("counted")'),
    );
    await delay(100);
    const bomb = await culprit!.execute('new Array(1e8).fill(0)');
    expect(bomb.reset).toBe(true);
    expect(['SandboxCrashedError', 'MemoryLimitError', 'TimeoutError']).toContain(bomb.error?.name);
    for (const result of await Promise.all(bystanderBlocks)) {
      if (result.error) expect(result.error).toMatchObject({ name: 'SandboxCrashedError', message: expect.stringMatching(/stopped while running the block \(.+\)/) });
      else expect(result.stdout).toMatch(/^(answered|counted)\n$/);
    }
    expect(performance.now() - started).toBeLessThan(25_000);
    for (const sandbox of hosts) {
      // A run whose block finished before the crash hears of it at its next block.
      const next = await sandbox.execute('print("usable")');
      if (next.error) expect(next.error).toMatchObject({ name: 'SandboxCrashedError', message: expect.stringContaining('stopped between blocks') });
      else expect(next.stdout).toBe('usable\n');
      expect((await sandbox.execute('print("usable")')).stdout).toBe('usable\n');
    }
    for (const sandbox of elsewhere) expect((await sandbox.execute('print(untouched)')).stdout).toBe('kept\n');
  }, 40_000);
});

describe('recycling shared worker processes', () => {
  afterEach(() => workerPool.setRecycling({ runsPerWorker: 1_000 }));

  it('retires a process after its number of runs, under load, and ends it once its last run is gone', async () => {
    workerPool.setRecycling({ runsPerWorker: 3 });
    const sandboxes = await Promise.all(Array.from({ length: 12 }, (_, index) => createSandbox({ onHostCall: async () => (await delay(20), `answer ${index}`) })));
    const results = await Promise.all(sandboxes.map((sandbox) => sandbox.execute('print(llm_query("q"))')));
    results.forEach((result, index) => expect(result.stdout).toBe(`answer ${index}\n`));
    const used = [...new Set(sandboxes.map((sandbox) => sandbox.processId!))];
    expect(used.length).toBeGreaterThanOrEqual(4); // 12 runs, at most 3 each
    const retired = used.filter((pid) => !workerPool.sharedProcessIds.includes(pid));
    expect(retired.length).toBeGreaterThan(0);
    await Promise.all(sandboxes.map((sandbox) => sandbox.dispose()));
    expect(await eventually(() => !retired.some(isRunning), 5_000)).toBe(true);
  }, 30_000);
});

describe.each(ISOLATIONS)('sessions with %s isolation', (isolation) => {
  inIsolation(isolation);

  it('keep their sandbox, variables and process across completions', async () => {
    const languageModel = new ScriptedModel((request, index) => {
      if (index === 0) return repl('var remembered = "from the first completion"');
      if (index === 1) return 'FINAL(first)';
      if (index === 2) return repl('print(remembered)');
      return `FINAL(${JSON.stringify(request.messages.at(-1)?.content).includes('from the first completion') ? 'remembered' : 'forgotten'})`;
    });
    const session = new RLM({ model: 'root', languageModel, sandbox: { isolation } }).session();
    try {
      expect((await session.completion('one')).response).toBe('first');
      expect((await session.completion('two')).response).toBe('remembered');
    } finally {
      await session.close();
    }
  });
});
