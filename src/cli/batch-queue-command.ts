import { DEFAULTS } from '../defaults.js';
import { loadScorer, readTasksFile, SCORERS } from '../index.js';
import { checkBatchName, connectionOptions, readBatchStatus, runQueuedBatch, type BatchStatus, type QueueAddress } from '../queue.js';
import { exitCode, summaryText, type BatchFlags } from './batch-command.js';
import { BatchProgress } from './batch-progress.js';
import type { CommandIo } from './io.js';
import { EXIT, UsageError } from './usage-error.js';

/** The flags `rlm batch` has with --queue. */
export interface BatchQueueFlags extends BatchFlags {
  queue?: string;
  name?: string;
  attempts?: number;
  retryDelay?: number;
  maxInlineMb?: number;
}

/** The run flags that belong to the workers: with --queue the coordinator runs nothing itself. */
const WORKER_FLAGS = ['model', 'subModel', 'baseUrl', 'apiKey', 'concurrency', 'dataDir', 'setup', 'mcp', 'mcpConfig', 'systemPrompt', 'logDir'] as const;

/**
 * `rlm batch TASKS --out RESULTS --queue URL`: the coordinator. Queues the tasks for `rlm worker`s,
 * writes their results, prints the summary; the exit codes are `rlm batch`'s.
 */
export async function batchQueueCommand(tasksPath: string, flags: BatchQueueFlags, io: CommandIo): Promise<number> {
  const address = queueAddress(flags);
  if (!flags.out) throw new UsageError(`Give the results file with --out, e.g. rlm batch ${tasksPath} --out results.jsonl --queue ${flags.queue} (running the same command again re-attaches to the batch).`);
  const ignored = WORKER_FLAGS.filter((flag) => flags[flag] !== undefined).map((flag) => `--${flag.replace(/[A-Z]/g, (letter) => `-${letter.toLowerCase()}`)}`);
  if (ignored.length > 0) io.stderr.write(`rlm: with --queue, ${ignored.join(', ')} ${ignored.length === 1 ? 'is' : 'are'} the workers' to give (rlm worker ...): ignored here.\n`);
  // A scorer by name is checked here; a module is the workers' to load, from their --data-dir.
  if (flags.scorer !== undefined && flags.scorer in SCORERS) await loadScorer(flags.scorer);
  const total = readTasksFile(tasksPath, { checkPaths: false }).length;
  const progress = new BatchProgress(flags.quiet ? 'quiet' : io.stderr.isTTY ? 'live' : 'lines', io.stderr, total);
  if (!flags.quiet) io.stderr.write(`rlm: batch ${address.name}: queueing the tasks of ${tasksPath}; start workers with: rlm worker --queue URL${address.name === DEFAULTS.queue.batchName ? '' : ` --name ${address.name}`}\n`);
  let summary;
  try {
    summary = await runQueuedBatch({
      address,
      tasksPath,
      out: flags.out,
      settings: { ...(flags.scorer !== undefined && { scorer: flags.scorer }), ...(flags.taskBudget !== undefined && { taskBudgetUsd: flags.taskBudget }) },
      maxBudgetUsd: flags.maxBudget,
      retryFailed: Boolean(flags.retryFailed),
      attempts: flags.attempts ?? DEFAULTS.batch.attempts,
      backoffMs: flags.retryDelay === undefined ? DEFAULTS.queue.backoffMs : Math.round(flags.retryDelay * 1000),
      maxInlineBytes: flags.maxInlineMb === undefined ? DEFAULTS.queue.maxInlineBytes : Math.round(flags.maxInlineMb * 2 ** 20),
      collectIntervalMs: DEFAULTS.queue.collectIntervalMs,
      signal: io.interrupt,
      // Tasks run on the workers; the progress view counts each as it ends.
      onEvent: (event) => {
        if (event.type === 'task-end') progress.handle({ type: 'task-start', id: event.record.id });
        progress.handle(event);
      },
    });
  } finally {
    progress.stop();
  }
  io.stdout.write(flags.json ? `${JSON.stringify(summary, null, 2)}\n` : summaryText(summary, flags.out));
  return exitCode(summary, io);
}

/** The flags of `rlm batch status`. */
export interface BatchStatusFlags {
  queue?: string;
  name?: string;
  json?: boolean;
}

/** `rlm batch status --queue URL`: the batch's figures, as Redis holds them. */
export async function batchStatusCommand(flags: BatchStatusFlags, io: CommandIo): Promise<number> {
  const status = await readBatchStatus(queueAddress(flags));
  io.stdout.write(flags.json ? `${JSON.stringify(status, null, 2)}\n` : statusText(status));
  return EXIT.ok;
}

function queueAddress(flags: { queue?: string; name?: string }): QueueAddress {
  if (!flags.queue) throw new UsageError('Give the queue with --queue redis://HOST:PORT[/DB].');
  connectionOptions(flags.queue);
  return { url: flags.queue, name: checkBatchName(flags.name ?? DEFAULTS.queue.batchName) };
}

function statusText(status: BatchStatus): string {
  const eta = status.etaSeconds === null ? 'unknown (no result in the last minute)' : status.etaSeconds === 0 ? 'done' : `${Math.ceil(status.etaSeconds / 60)} min`;
  const budget = status.budgetUsd === null ? 'no budget' : `budget $${status.budgetUsd}`;
  return `${[
    `batch ${status.name}: ${status.total} tasks`,
    `  waiting ${status.waiting} · active ${status.active} · completed ${status.completed} · failed ${status.failed}${status.uncollected > 0 ? ` · finished, not yet written ${status.uncollected}` : ''}`,
    `  workers: ${status.workers.length}${status.workers.length > 0 ? ` (${status.workers.join(', ')})` : ''}`,
    `  spent $${status.spentUsd.toFixed(6)} (${budget})`,
    `  throughput ${status.tasksPerMinute.toFixed(1)} tasks/min · ETA ${eta}`,
  ].join('\n')}\n`;
}
