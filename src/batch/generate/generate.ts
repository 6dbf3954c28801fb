import { ConfigurationError } from '../../errors.js';
import { aggregateTask } from './aggregate.js';
import { seededRandom, type SeededRandom } from './seeded-random.js';
import { DEFAULT_SIZES, formatSize, MAX_CONTEXT_CHARS, MIN_CONTEXT_CHARS, parseSizes } from './sizes.js';
import { sniahTask } from './sniah.js';
import type { GeneratedTask } from './task.js';

const GENERATORS = { sniah: sniahTask, aggregate: aggregateTask } satisfies Record<string, (random: SeededRandom, options: { id: string; size: number }) => GeneratedTask>;

export type TaskSetKind = keyof typeof GENERATORS;
export const TASK_SET_KINDS = Object.keys(GENERATORS) as TaskSetKind[];

export interface GenerateTasksOptions {
  /** sniah: a needle in a haystack; aggregate: counting over labelled records. */
  kind: TaskSetKind;
  /** How many tasks in all; they take the sizes in turn. */
  count: number;
  /** The same seed gives the same tasks, byte for byte. */
  seed: number;
  /** Context sizes in characters, or as text such as "8k,64k,1m" (default). */
  sizes?: number[] | string;
}

/**
 * A seeded, reproducible task set with the right answers, one task at a time (a 10M-character
 * context is built only when its task is reached). Task `i` depends only on the kind, the seed, `i`
 * and its size, so a larger --count extends a smaller one.
 */
export function generateTasks(options: GenerateTasksOptions): Generator<GeneratedTask> {
  // Checked now, not at the first task: a caller learns of a bad option before writing anything.
  return tasksOf(options, checkOptions(options));
}

function* tasksOf(options: GenerateTasksOptions, sizes: number[]): Generator<GeneratedTask> {
  const generate = GENERATORS[options.kind];
  for (let index = 0; index < options.count; index++) {
    const size = sizes[index % sizes.length]!;
    const id = `${options.kind}-${index}-${formatSize(size)}`;
    yield generate(seededRandom(options.kind, options.seed, index, size), { id, size });
  }
}

function checkOptions(options: GenerateTasksOptions): number[] {
  if (!Object.hasOwn(GENERATORS, options.kind)) {
    throw new ConfigurationError(`Unknown task set "${String(options.kind)}": write one of ${TASK_SET_KINDS.join(', ')}.`);
  }
  if (!Number.isInteger(options.count) || options.count < 1) {
    throw new ConfigurationError(`A task set needs a count of 1 or more, not ${String(options.count)}: write e.g. --count 50.`);
  }
  if (!Number.isSafeInteger(options.seed) || options.seed < 0) {
    throw new ConfigurationError(`A seed is a whole number of 0 or more, not ${String(options.seed)}: write e.g. --seed 1.`);
  }
  const sizes = typeof options.sizes === 'string' ? parseSizes(options.sizes) : (options.sizes ?? parseSizes(DEFAULT_SIZES));
  if (sizes.length === 0 || sizes.some((size) => !Number.isInteger(size) || size < MIN_CONTEXT_CHARS || size > MAX_CONTEXT_CHARS)) {
    throw new ConfigurationError(`Sizes must be whole numbers of characters from ${MIN_CONTEXT_CHARS} to ${MAX_CONTEXT_CHARS}, not ${JSON.stringify(sizes)}.`);
  }
  return sizes;
}
