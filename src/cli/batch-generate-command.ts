// `rlm batch generate`: writes a seeded task set for measuring a model with `rlm batch`. Loaded at
// every start of the CLI (main.ts adds the subcommand), so only commander and small modules are
// imported here; the generators load when the command runs.
import { closeSync, mkdirSync, openSync, renameSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { Argument, InvalidArgumentError, type Command } from 'commander';
import type { GeneratedTask, TaskSetKind } from '../index.js';
import { number } from './run-options.js';
import { UsageError } from './usage-error.js';

/** The flags of `rlm batch generate`, as commander parses them. */
export interface BatchGenerateFlags {
  count: number;
  seed: number;
  sizes?: string;
  out: string;
  contextFiles?: boolean;
}

const EXAMPLES = `
Examples:
  $ rlm batch generate sniah --count 30 --seed 1 --sizes 8k,64k,1m --out needles.jsonl
  $ rlm batch generate aggregate --count 20 --seed 7 --sizes 64k --out counts.jsonl
  $ rlm batch needles.jsonl --out results.jsonl --scorer exact`;

/** Adds `generate` to the `batch` command. */
export function addBatchGenerateCommand(batch: Command): void {
  batch
    .command('generate')
    .description('write a seeded task set with right answers: sniah (a needle in a haystack) or aggregate (counting over labelled records)')
    .addArgument(new Argument('<kind>', 'the kind of task set').choices(['sniah', 'aggregate']))
    .requiredOption('--count <n>', 'how many tasks in all; they take the sizes in turn', number('integer'))
    .option('--seed <n>', 'the same seed writes the same file, byte for byte', seed, 1)
    .option('--sizes <list>', 'context sizes in characters, k = 1,000, m = 1,000,000, from 1k to 10m (default: 8k,64k,1m)')
    .requiredOption('--out <file>', 'the tasks file to write (JSON Lines)')
    .option('--context-files', 'write each context to a file in <out>.contexts/ and refer to it by context_path')
    .addHelpText('after', EXAMPLES)
    .action(async (kind: TaskSetKind, flags: BatchGenerateFlags, command: Command) => {
      const written = await writeTaskSet(kind, flags);
      command.configureOutput().writeOut?.(`${flags.out}\n`);
      command.configureOutput().writeErr?.(`rlm: wrote ${written} ${kind} tasks (seed ${flags.seed})\n`);
    });
}

function seed(value: string): number {
  const parsed = Number(value);
  if (!Number.isSafeInteger(parsed) || parsed < 0) throw new InvalidArgumentError('expected a whole number of 0 or more, e.g. --seed 1.');
  return parsed;
}

/**
 * Writes the tasks one line at a time (a task with a 10M-character context is built, written and
 * dropped before the next), into a temporary file renamed into place at the end, so a failed or
 * interrupted run never leaves a half-written tasks file behind.
 */
async function writeTaskSet(kind: TaskSetKind, flags: BatchGenerateFlags): Promise<number> {
  const { generateTasks } = await import('../index.js');
  const tasks = generateTasks({ kind, count: flags.count, seed: flags.seed, sizes: flags.sizes });
  const partial = `${flags.out}.partial`;
  const file = openForWriting(partial);
  let written = 0;
  try {
    const contextFolder = flags.contextFiles ? prepareContextFolder(flags.out) : undefined;
    for (const task of tasks) {
      writeSync(file, JSON.stringify(contextFolder ? withContextFile(task, contextFolder, dirname(flags.out)) : task) + '\n');
      written++;
    }
  } catch (error) {
    closeSync(file);
    rmSync(partial, { force: true });
    throw error;
  }
  closeSync(file);
  renameSync(partial, flags.out);
  return written;
}

function openForWriting(path: string): number {
  try {
    return openSync(path, 'w');
  } catch (error) {
    throw new UsageError(`Cannot write ${path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}. Choose another path with --out.`);
  }
}

/** <out>.contexts/, emptied: files of an earlier set with other ids must not linger beside the new one. */
function prepareContextFolder(out: string): string {
  const folder = join(dirname(out), `${basename(out).replace(/\.jsonl?$/, '')}.contexts`);
  rmSync(folder, { recursive: true, force: true });
  mkdirSync(folder, { recursive: true });
  return folder;
}

/** The task with its context in a file, named relative to the tasks file's folder (where rlm batch looks by default). */
function withContextFile(task: GeneratedTask, folder: string, tasksFolder: string) {
  const path = join(folder, `${task.id}.txt`);
  writeFileSync(path, task.context);
  return { id: task.id, query: task.query, context_path: relative(tasksFolder, path), expected: task.expected };
}
