// Batch benchmark: `runBatch` over needle tasks against the strategy upstream (in its own process)
// answering every request after a fixed latency. A task's model calls come in four rounds, one
// after the other (three root turns, and between the second and third the sub-calls, all at
// once), so a batch cannot finish before tasks * rounds * latency / concurrency: that ideal is
// the baseline each row is measured against. rlm's own time per task is what a task took beyond
// its rounds of model latency (sandbox start, code, queues, and waiting for a core); CPU per task
// is this process and its sandbox workers (each task's sandbox is a worker process of its own,
// never reused for another task), which bounds throughput at cores / CPU per task whatever the
// concurrency; memory is the peak of this process and its workers.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../src/paths.js';
import { runBatch, type TaskLine } from '../src/index.js';
import { needleTask } from '../src/testing.js';
import { startServerProcess } from './fake-server.js';
import { childPids, rssKb } from './processes.js';
import { median, ms, printTable } from './report.js';

const setting = (name: string, fallback: number) => (process.env[name] ? Number(process.env[name]) : fallback);
const LATENCY = setting('RLM_BATCH_LATENCY_MS', 200);
/** Model calls one after another in each task (see the header). */
const ROUNDS = 4;
const SETTINGS = [
  { concurrency: 1, tasks: setting('RLM_BATCH_TASKS_1', 10) },
  { concurrency: 8, tasks: setting('RLM_BATCH_TASKS_8', 48) },
  { concurrency: 32, tasks: setting('RLM_BATCH_TASKS_32', 96) },
];

function tasks(count: number): TaskLine[] {
  return Array.from({ length: count }, (_, index) => {
    const task = needleTask(index, 60);
    return { id: `b${index}`, query: task.question, context: task.context, expected: task.answer };
  });
}

/** Resident memory of this process and every process it started (the sandbox workers), in MB. */
function residentMb(): number {
  const kb = rssKb(process.pid) + childPids(process.pid).reduce((sum, pid) => sum + rssKb(pid), 0);
  return kb / 1024;
}

/** CPU seconds of this process and of its ended children (the sandbox workers), from /proc (Linux). */
function cpuSeconds(): number {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  // utime, stime, cutime, cstime: fields 14 to 17 of stat, counted from the state (field 3) here.
  return fields.slice(11, 15).reduce((sum, ticks) => sum + Number(ticks), 0) / 100;
}

async function measure(baseURL: string, concurrency: number, count: number): Promise<string[]> {
  const durations: number[] = [];
  let peakMb = 0;
  const sampler = setInterval(() => (peakMb = Math.max(peakMb, residentMb())), 200);
  const started = performance.now();
  const cpuBefore = cpuSeconds();
  // Requests per model are not what is measured here: room for every task's sub-calls at once.
  const summary = await runBatch({
    model: 'fake-rlm',
    baseURL,
    tasks: tasks(count),
    concurrency,
    maxConcurrency: 1_000,
    scorer: 'contains',
    onResult: (record) => durations.push(record.duration_ms),
  });
  const wallMs = performance.now() - started;
  const cpuPerTaskMs = ((cpuSeconds() - cpuBefore) / count) * 1000;
  clearInterval(sampler);
  const idealMs = (count * ROUNDS * LATENCY) / concurrency;
  const ownPerTask = median(durations) - ROUNDS * LATENCY;
  return [
    String(concurrency),
    String(count),
    `${summary.completed}/${count}${summary.accuracy === 1 ? '' : ` (accuracy ${summary.accuracy})`}`,
    `${(wallMs / 1000).toFixed(2)} s`,
    `${(idealMs / 1000).toFixed(2)} s`,
    `${(((wallMs - idealMs) / idealMs) * 100).toFixed(1)}%`,
    `${((count / wallMs) * 1000).toFixed(2)}/s`,
    ms(ownPerTask),
    ms(cpuPerTaskMs),
    `${peakMb.toFixed(0)} MB`,
  ];
}

export async function runBatchBench(): Promise<void> {
  const strategy = `(await import(${JSON.stringify(join(packageRoot(), 'dist', 'testing.js'))})).rlmStrategyReply`;
  const server = await startServerProcess(LATENCY, strategy);
  const rows: string[][] = [];
  try {
    // One task first, so the engine's modules and the first worker are loaded outside the figures.
    await runBatch({ model: 'fake-rlm', baseURL: server.baseURL, tasks: tasks(1) });
    for (const { concurrency, tasks: count } of SETTINGS) rows.push(await measure(server.baseURL, concurrency, count));
  } finally {
    server.close();
  }
  printTable(
    `batch: needle tasks, ${ROUNDS} rounds of model calls each at ${LATENCY} ms; ideal = tasks * rounds * latency / concurrency`,
    ['concurrency', 'tasks', 'completed', 'wall', 'ideal', 'over ideal', 'throughput', 'rlm own time / task (median)', 'CPU / task', 'peak RSS (with workers)'],
    rows,
  );
}
