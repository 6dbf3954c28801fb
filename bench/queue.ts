// Queue benchmark: `rlm batch --queue` with 1, 2 and 4 `rlm worker` processes (the real binary,
// child processes) against a real redis-server and the strategy upstream at a fixed model latency;
// the baseline is `rlm batch` without a queue in the same run, at the concurrency of one worker.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { packageRoot } from '../src/paths.js';
import { needleTask } from '../src/testing.js';
import { startServerProcess } from './fake-server.js';
import { printTable } from './report.js';

const BIN = join(packageRoot(), 'bin', 'rlm.js');
const setting = (name: string, fallback: number) => (process.env[name] ? Number(process.env[name]) : fallback);
const TASKS = setting('RLM_QUEUE_BENCH_TASKS', 48);
const LATENCY_MS = setting('RLM_QUEUE_BENCH_LATENCY_MS', 200);
/** Tasks one worker runs at once (and the baseline's --concurrency). */
const PER_WORKER = 4;
const WORKER_COUNTS = [1, 2, 4];

interface Measured {
  label: string;
  wallMs: number;
}

export async function runQueueBench(): Promise<void> {
  const folder = mkdtempSync(join(tmpdir(), 'rlm-queue-bench-'));
  const testing = JSON.stringify(join(packageRoot(), 'dist', 'testing.js'));
  const upstream = await startServerProcess(LATENCY_MS, `(await import(${testing})).rlmStrategyReply`);
  const redis = await startRedisServer(folder);
  try {
    const tasks = writeTasks(folder);
    const baseline = await timeBatch(['batch', tasks, '--out', join(folder, 'direct.jsonl'), '--base-url', upstream.baseURL, '--model', 'fake-rlm', '--concurrency', String(PER_WORKER), '--quiet']);
    const queued: Measured[] = [];
    for (const workers of WORKER_COUNTS) queued.push(await timeQueued({ workers, folder, tasks, redisUrl: redis.url, baseURL: upstream.baseURL }));
    report(baseline, queued);
  } finally {
    upstream.close();
    redis.child.kill();
    rmSync(folder, { recursive: true, force: true });
  }
}

function writeTasks(folder: string): string {
  const lines = Array.from({ length: TASKS }, (_, index) => {
    const task = needleTask(index, 60);
    return JSON.stringify({ id: `t${index}`, query: task.question, context: task.context, expected: task.answer });
  });
  const path = join(folder, 'tasks.jsonl');
  writeFileSync(path, `${lines.join('\n')}\n`);
  return path;
}

/** Wall time of one whole CLI process (it must exit 0). */
async function timeBatch(args: string[]): Promise<number> {
  const started = performance.now();
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  if (code !== 0) throw new Error(`rlm ${args.join(' ')} exited with ${code}: ${stderr}`);
  return performance.now() - started;
}

/** Starts the workers, waits until each takes tasks, then times the coordinator. */
async function timeQueued({ workers, folder, tasks, redisUrl, baseURL }: { workers: number; folder: string; tasks: string; redisUrl: string; baseURL: string }): Promise<Measured> {
  const name = `bench-${workers}`;
  const started: ChildProcess[] = [];
  try {
    for (let index = 0; index < workers; index++) {
      const child = spawn(process.execPath, [BIN, 'worker', '--queue', redisUrl, '--name', name, '--base-url', baseURL, '--model', 'fake-rlm', '--concurrency', String(PER_WORKER)], { stdio: ['ignore', 'ignore', 'pipe'] });
      started.push(child);
      await new Promise<void>((resolve) => child.stderr!.on('data', (chunk: Buffer) => chunk.toString().includes('taking tasks') && resolve()));
    }
    const wallMs = await timeBatch(['batch', tasks, '--out', join(folder, `${name}.jsonl`), '--queue', redisUrl, '--name', name, '--quiet']);
    return { label: `${workers} worker${workers === 1 ? '' : 's'}`, wallMs };
  } finally {
    for (const child of started) child.kill('SIGTERM');
    await Promise.all(started.map((child) => (child.exitCode === null ? once(child, 'exit') : undefined)));
  }
}

function report(baselineMs: number, queued: Measured[]): void {
  const perSecond = (wallMs: number) => TASKS / (wallMs / 1000);
  const one = queued[0]!;
  const rows = [
    ['rlm batch (no queue)', `${PER_WORKER}`, (baselineMs / 1000).toFixed(1), perSecond(baselineMs).toFixed(2), '', ''],
    ...queued.map((measured, index) => {
      const workers = WORKER_COUNTS[index]!;
      const linear = perSecond(one.wallMs) * workers;
      return [`--queue, ${measured.label}`, `${workers * PER_WORKER}`, (measured.wallMs / 1000).toFixed(1), perSecond(measured.wallMs).toFixed(2), linear.toFixed(2), `${((perSecond(measured.wallMs) / linear) * 100).toFixed(0)}%`];
    }),
  ];
  printTable(
    `Queue: ${TASKS} needle tasks (strategy upstream, ${LATENCY_MS} ms per model call), ${PER_WORKER} tasks at once per worker process, ${cpus().length} cores; target: within 10% of linear while cores are spare`,
    ['setup', 'tasks at once', 'wall s', 'tasks/s', 'linear tasks/s', 'of linear'],
    rows,
  );
  const costMs = (one.wallMs - baselineMs) / TASKS;
  console.log(`queue's cost per task (1 worker against rlm batch, same concurrency): ${costMs.toFixed(1)} ms (${((one.wallMs / baselineMs - 1) * 100).toFixed(1)}% of the wall time)`);
}

/** A redis-server of its own on a free loopback port, data in `folder`, no persistence. */
async function startRedisServer(folder: string): Promise<{ url: string; child: ChildProcess }> {
  const port = await new Promise<number>((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port: free } = probe.address() as { port: number };
      probe.close(() => resolve(free));
    });
  });
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', folder, '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve) => child.stdout!.on('data', (chunk: Buffer) => chunk.toString().includes('Ready to accept') && resolve()));
  return { url: `redis://127.0.0.1:${port}`, child };
}
