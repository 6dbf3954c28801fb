import { resolve } from 'node:path';
import { DEFAULTS } from '../defaults.js';
import { loadScorer, SCORERS, type Scorer } from '../index.js';
import { checkBatchName, connectionOptions, displayUrl, startQueueWorker, workerTaskRunner, type QueueWorkerEvent } from '../queue.js';
import type { CommandIo } from './io.js';
import { buildOptions } from './run-command.js';
import type { RunOptionFlags } from './run-options.js';
import { stopRequested } from './stop-signals.js';
import { EXIT, UsageError } from './usage-error.js';

/** The flags of `rlm worker`, as commander parses them. */
export interface WorkerFlags extends RunOptionFlags {
  queue?: string;
  name?: string;
  concurrency?: number;
  dataDir?: string;
  /** Seconds running tasks get to finish after SIGTERM or Ctrl-C. */
  grace?: number;
  lockDuration?: number;
  stalledInterval?: number;
  model?: string;
  subModel?: string;
  quiet?: boolean;
}

/**
 * `rlm worker --queue URL`: runs the tasks of a batch's queue with this machine's models, key and
 * files until SIGTERM or Ctrl-C; then takes no new task, gives running ones the grace period,
 * hands back the rest, and exits 0.
 */
export async function workerCommand(flags: WorkerFlags, io: CommandIo): Promise<number> {
  if (!flags.queue) throw new UsageError('Give the queue with --queue redis://HOST:PORT (the one `rlm batch --queue` was given).');
  connectionOptions(flags.queue);
  const address = { url: flags.queue, name: checkBatchName(flags.name ?? DEFAULTS.queue.batchName) };
  // A worker's --max-budget caps each of its runs; the batch's budget is the coordinator's, in Redis.
  const { maxBudgetUsd: runBudgetUsd, ...options } = await buildOptions(flags, io);
  const dataDir = resolve(flags.dataDir ?? '.');
  const runTask = workerTaskRunner({ ...options, dataDir });
  const scorers = new Map<string, Promise<Scorer>>();
  const scorerFor = (spec: string | undefined) => {
    if (spec === undefined) return undefined;
    // A scorer module is the workers' to load, like the tasks' paths: relative to --data-dir.
    if (!scorers.has(spec)) scorers.set(spec, loadScorer(spec in SCORERS ? spec : resolve(dataDir, spec)));
    return scorers.get(spec);
  };
  const concurrency = flags.concurrency ?? DEFAULTS.queue.concurrency;
  const graceMs = seconds(flags.grace) ?? DEFAULTS.queue.graceMs;
  const worker = await startQueueWorker({
    address,
    concurrency,
    graceMs,
    lockDurationMs: seconds(flags.lockDuration) ?? DEFAULTS.queue.lockDurationMs,
    stalledIntervalMs: seconds(flags.stalledInterval) ?? DEFAULTS.queue.stalledIntervalMs,
    runTask: async ({ line, settings, account, signal, attempts }) => {
      const taskBudgetUsd = Math.min(settings.taskBudgetUsd ?? Infinity, runBudgetUsd ?? Infinity);
      return runTask({ line, scorer: await scorerFor(settings.scorer), account, attempts, signal, ...(Number.isFinite(taskBudgetUsd) && { taskBudgetUsd }) });
    },
    onEvent: flags.quiet ? undefined : (event) => io.stderr.write(`rlm worker: ${eventText(event)}\n`),
  });
  if (!flags.quiet) io.stderr.write(`rlm worker: taking tasks of batch ${address.name} from ${displayUrl(address.url)}, ${concurrency} at a time; Ctrl-C or SIGTERM stops it.\n`);
  await Promise.race([stopRequested(io.interrupt), worker.closed]);
  if (!flags.quiet) io.stderr.write(`rlm worker: stopping: no new tasks; running ones have ${graceMs / 1000} s to finish, then go back to the queue.\n`);
  await worker.stop();
  if (!flags.quiet) io.stderr.write('rlm worker: stopped.\n');
  return EXIT.ok;
}

function seconds(value: number | undefined): number | undefined {
  return value === undefined ? undefined : Math.round(value * 1000);
}

function eventText(event: QueueWorkerEvent): string {
  if (event.type === 'error') return `error: ${event.message}`;
  if (event.type === 'task-start') return `${event.taskId}: started (run ${event.attempt})`;
  const said = { completed: 'completed', failed: 'failed', retry: 'failed, will be tried again', 'handed-back': 'handed back to the queue', 'not-started': 'not started: the batch budget is spent' };
  return `${event.taskId}: ${said[event.status]}`;
}
