import { describe, expect, it } from 'vitest';
import { ConfigurationError, generateTasks, type GenerateTasksOptions } from '../../src/index.js';
import { parseSizes } from '../../src/batch/generate/sizes.js';
import { aggregateAnswer, sizeOfId, sniahAnswer } from './generated-answers.js';

const SEEDS = [1, 2, 99, 123_456];
const SIZES = '1k,8k,64k,1m';

const all = (options: GenerateTasksOptions) => [...generateTasks(options)];

describe('sniah task sets', () => {
  it.each(SEEDS)('hide one needle whose value is the expected answer, in contexts of exactly the size asked (seed %i)', (seed) => {
    const tasks = all({ kind: 'sniah', count: 8, seed, sizes: SIZES });
    expect(tasks.map((task) => sizeOfId(task.id))).toEqual([1_000, 8_000, 64_000, 1_000_000, 1_000, 8_000, 64_000, 1_000_000]);
    for (const task of tasks) {
      expect(task.context.length).toBe(sizeOfId(task.id));
      expect(sniahAnswer(task)).toBe(task.expected);
      expect(task.expected).toMatch(/^\d{7}$/);
    }
  });

  it('builds a 10M-character haystack', () => {
    const [task] = all({ kind: 'sniah', count: 1, seed: 5, sizes: '10m' });
    expect(task!.id).toBe('sniah-0-10m');
    expect(task!.context.length).toBe(10_000_000);
    expect(sniahAnswer(task!)).toBe(task!.expected);
  });

  it('puts the needle anywhere in the haystack, not in one place', () => {
    const places = all({ kind: 'sniah', count: 40, seed: 3, sizes: '8k' }).map((task) => task.context.indexOf('The special magic number') / task.context.length);
    expect(places.some((place) => place < 0.3)).toBe(true);
    expect(places.some((place) => place > 0.7)).toBe(true);
    expect(new Set(places.map((place) => place.toFixed(3))).size).toBeGreaterThan(30);
  });
});

describe('aggregate task sets', () => {
  it.each(SEEDS)('ask counting questions whose expected answers match a recount of the records (seed %i)', (seed) => {
    const tasks = all({ kind: 'aggregate', count: 12, seed, sizes: SIZES });
    for (const task of tasks) {
      const size = sizeOfId(task.id);
      expect(task.context.length).toBeLessThanOrEqual(size);
      expect(task.context.length).toBeGreaterThan(size - 64); // whole records, filled to the size
      expect(aggregateAnswer(task).answer).toBe(task.expected);
    }
  });

  it('ask every kind of question, with answers that are not all zero', () => {
    const tasks = all({ kind: 'aggregate', count: 60, seed: 11, sizes: '8k,64k' });
    const answers = tasks.map(aggregateAnswer);
    expect(new Set(answers.map((answer) => answer.kind))).toEqual(new Set(['label', 'among users', 'month', 'distinct users', 'most common']));
    expect(answers.filter((answer) => answer.kind !== 'most common' && Number(answer.answer) > 0).length).toBeGreaterThan(30);
  });
});

describe('reproducibility', () => {
  it.each(['sniah', 'aggregate'] as const)('%s: the same seed gives the same tasks, another seed others, and a larger count extends a smaller one', (kind) => {
    const text = (options: GenerateTasksOptions) => all(options).map((task) => JSON.stringify(task)).join('\n');
    const options = { kind, count: 6, seed: 42, sizes: '8k,64k' };
    expect(text(options)).toBe(text(options));
    expect(text({ ...options, seed: 43 })).not.toBe(text(options));
    expect(text(options).startsWith(text({ ...options, count: 3 }))).toBe(true);
  });
});

describe('bad options', () => {
  it.each([
    [{ kind: 'haystack' }, 'write one of sniah, aggregate'],
    [{ count: 0 }, 'count of 1 or more'],
    [{ count: 2.5 }, 'count of 1 or more'],
    [{ seed: -1 }, 'whole number of 0 or more'],
    [{ sizes: '12q' }, '"12q" is not a size: write sizes as characters with an optional k or m suffix'],
    [{ sizes: '8k,,64k' }, 'empty entry'],
    [{ sizes: '11m' }, 'write a size from 1k to 10m'],
    [{ sizes: '500' }, 'write a size from 1k to 10m'],
    [{ sizes: [20_000_000] }, 'from 1000 to 10000000'],
  ])('%o is a ConfigurationError that says what to write, thrown before any task is asked for', (change, message) => {
    const options = { kind: 'sniah', count: 1, seed: 1, ...change } as GenerateTasksOptions;
    expect(() => generateTasks(options)).toThrow(ConfigurationError);
    expect(() => generateTasks(options)).toThrow(message);
  });

  it('reads sizes as decimal characters with k and m suffixes', () => {
    expect(parseSizes('8k, 64K,1m')).toEqual([8_000, 64_000, 1_000_000]);
    expect(parseSizes('1.5m,10m,1000')).toEqual([1_500_000, 10_000_000, 1_000]);
  });
});
