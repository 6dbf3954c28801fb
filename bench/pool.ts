// Pooled sandboxes: what a run costs when it gets an isolate in a shared worker process (the
// default), against a worker process of its own (`isolation: 'process'`), both measured in this run.
import { spawn } from 'node:child_process';
import OpenAI from 'openai';
import { Sandbox, serve, type Isolation } from '../src/index.js';
import { packageRoot } from '../src/paths.js';
import { workerPool } from '../src/sandbox/pool.js';
import { startServerProcess } from './fake-server.js';
import { childPids, rssKb } from './processes.js';
import { median, ms, printTable, ratio } from './report.js';

const MODES: Isolation[] = ['isolate', 'process'];
const IDLE_RUNS = 40;
const READY_STARTS = 20;
const SERVE_RUNS: Record<Isolation, number> = { isolate: 256, process: 64 };
const THROUGHPUT = { requests: 400, concurrency: 16 };
const TARGET = { idleRunMb: 8, serveTotalMb: 2_500, readyMs: 5, completionsPerSecond: 100 };
const WAIT_MS = 6_000;

const mb = (value: number) => `${value.toFixed(1)} MB`;
const workersKb = (parent = process.pid) => childPids(parent, 'sandbox-worker').reduce((sum, pid) => sum + rssKb(pid), 0);

/** Resident memory of the worker processes per idle run beyond the first (each has run one block). */
async function idleRunMb(isolation: Isolation): Promise<number> {
  workerPool.drain();
  const first = await Sandbox.create({ isolation });
  await first.execute('const ready = 1');
  await new Promise((resolve) => setTimeout(resolve, 300)); // the pool's spares settle
  const before = workersKb();
  const more: Sandbox[] = [];
  for (let run = 0; run < IDLE_RUNS; run++) {
    const sandbox = await Sandbox.create({ isolation });
    await sandbox.execute('const ready = 1');
    more.push(sandbox);
  }
  await new Promise((resolve) => setTimeout(resolve, 300));
  const after = workersKb();
  await Promise.all([first, ...more].map((sandbox) => sandbox.dispose()));
  return (after - before) / 1024 / IDLE_RUNS;
}

/** A child run's sandbox, ready for its first block, with the pool warm (median). */
async function readyMs(isolation: Isolation): Promise<number> {
  const times: number[] = [];
  for (let start = 0; start < READY_STARTS; start++) {
    await Sandbox.prewarm(1, { isolation });
    const started = performance.now();
    const sandbox = await Sandbox.create({ isolation });
    await sandbox.execute('1');
    times.push(performance.now() - started);
    await sandbox.dispose();
  }
  return median(times);
}

// The upstream of the memory figure: every run's block waits on one slow sub-call.
const WAITING_ROOT = `(request) => {
  const messages = request.body.messages;
  if (messages.length === 1 && messages[0].content === 'wait') return { content: 'ok', delayMs: ${WAIT_MS} };
  return messages.some((message) => message.role === 'user' && String(message.content).startsWith('Code executed'))
    ? 'FINAL(done)' : '\\u0060\\u0060\\u0060repl\\nprint(llm_query("wait"))\\n\\u0060\\u0060\\u0060';
}`;

/** Peak resident memory of a real `rlm serve` and its workers while `runs` completions wait mid-block. */
async function serveMemoryMb(isolation: Isolation, runs: number): Promise<{ totalMb: number; workers: number }> {
  const upstream = await startServerProcess(0, WAITING_ROOT);
  const bin = `${packageRoot()}/bin/rlm.js`;
  const child = spawn(process.execPath, [bin, 'serve', '--base-url', upstream.baseURL, '--port', '0', '--isolation', isolation, '--max-concurrent-runs', String(runs)], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let stderr = '';
      child.stderr!.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
        const match = /serving an OpenAI-compatible API at (\S+)\/v1/.exec(stderr);
        if (match) resolve(match[1]!);
      });
      child.on('exit', () => reject(new Error(`rlm serve exited: ${stderr}`)));
    });
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 600_000 });
    let peakKb = 0;
    let workers = 0;
    const timer = setInterval(() => {
      peakKb = Math.max(peakKb, rssKb(child.pid!) + workersKb(child.pid!));
      workers = Math.max(workers, childPids(child.pid!, 'sandbox-worker').length);
    }, 100);
    const answers = await Promise.all(Array.from({ length: runs }, () => client.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'q' }] })));
    clearInterval(timer);
    if (answers.some((answer) => answer.choices[0]?.message.content !== 'done')) throw new Error('a completion did not answer "done"');
    return { totalMb: peakKb / 1024, workers };
  } finally {
    child.kill('SIGKILL');
    upstream.close();
  }
}

const TWO_CALL_ROOT = `(request) => request.body.messages.some((message) => message.role === 'user' && String(message.content).startsWith('Code executed'))
  ? 'FINAL(done)' : '\\u0060\\u0060\\u0060repl\\nprint(context.length)\\n\\u0060\\u0060\\u0060'`;

/** Completions per second through `serve` (two root calls each) against an upstream that answers at once. */
async function completionsPerSecond(isolation: Isolation, baseURL: string): Promise<number> {
  const server = await serve({ port: 0, maxConcurrentRuns: THROUGHPUT.concurrency, run: { baseURL, apiKey: 'unused', sandbox: { isolation } } });
  try {
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const ask = async () => {
      const answer = await client.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'q' }] });
      if (answer.choices[0]?.message.content !== 'done') throw new Error('a completion did not answer "done"');
    };
    const loop = async (total: number) => {
      let sent = 0;
      const started = performance.now();
      await Promise.all(Array.from({ length: THROUGHPUT.concurrency }, async () => {
        while (sent++ < total) await ask();
      }));
      return (total / (performance.now() - started)) * 1000;
    };
    await loop(2 * THROUGHPUT.concurrency);
    return await loop(THROUGHPUT.requests);
  } finally {
    await server.close(0);
  }
}

export async function runPoolBench(): Promise<void> {
  const figures = {} as Record<Isolation, { idleMb: number; readyMs: number; serve: { totalMb: number; workers: number }; perSecond: number }>;
  const upstream = await startServerProcess(0, TWO_CALL_ROOT);
  try {
    for (const isolation of MODES) {
      figures[isolation] = {
        idleMb: await idleRunMb(isolation),
        readyMs: await readyMs(isolation),
        perSecond: await completionsPerSecond(isolation, upstream.baseURL),
        serve: await serveMemoryMb(isolation, SERVE_RUNS[isolation]),
      };
      workerPool.drain();
    }
  } finally {
    upstream.close();
  }
  const { isolate, process: own } = figures;
  const perServeRun = (mode: Isolation) => figures[mode].serve.totalMb / SERVE_RUNS[mode];
  printTable(
    'Pooled sandboxes: an isolate per run in shared worker processes (default) against a process per run (--isolation process), same run',
    ['figure', 'isolate (default)', 'process per run (baseline)', 'isolate / baseline', 'target'],
    [
      [`resident memory per additional idle run (${IDLE_RUNS} runs)`, mb(isolate.idleMb), mb(own.idleMb), ratio(isolate.idleMb, own.idleMb), `<= ${TARGET.idleRunMb} MB`],
      [
        `rlm serve, ${SERVE_RUNS.isolate} concurrent runs waiting mid-block: server + workers, peak`,
        `${mb(isolate.serve.totalMb)} (${isolate.serve.workers} workers)`,
        `${SERVE_RUNS.process} runs: ${mb(own.serve.totalMb)} (${own.serve.workers} workers); x${SERVE_RUNS.isolate / SERVE_RUNS.process} = ${mb(perServeRun('process') * SERVE_RUNS.isolate)}`,
        ratio(perServeRun('isolate'), perServeRun('process')),
        `< ${TARGET.serveTotalMb} MB`,
      ],
      [`rlm serve completions/s, zero-latency upstream, 2 root calls each (${THROUGHPUT.concurrency} callers)`, isolate.perSecond.toFixed(1), own.perSecond.toFixed(1), ratio(isolate.perSecond, own.perSecond), `>= ${TARGET.completionsPerSecond}/s`],
      [`child sandbox ready: create + first block, pool warm (median of ${READY_STARTS})`, ms(isolate.readyMs), ms(own.readyMs), ratio(isolate.readyMs, own.readyMs), `<= ${TARGET.readyMs} ms`],
    ],
  );
}
