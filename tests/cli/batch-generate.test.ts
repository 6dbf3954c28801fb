import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { aggregateAnswer, sizeOfId, sniahAnswer, type TaskLine } from '../batch/generated-answers.js';
import { runCli, scratch } from './helpers.js';

function readTasks(path: string): TaskLine[] {
  return readFileSync(path, 'utf8').trimEnd().split('\n').map((line) => JSON.parse(line) as TaskLine);
}

describe('rlm batch generate', () => {
  it('writes a sniah task set whose expected answers are the needles, and prints its path', async () => {
    const out = join(scratch, 'needles.jsonl');
    const result = await runCli(['batch', 'generate', 'sniah', '--count', '6', '--seed', '9', '--sizes', '8k,64k,1m', '--out', out]);
    expect(result).toMatchObject({ code: 0, stdout: `${out}\n` });
    expect(result.stderr).toContain('wrote 6 sniah tasks (seed 9)');
    const tasks = readTasks(out);
    expect(tasks.map((task) => task.id)).toEqual(['sniah-0-8k', 'sniah-1-64k', 'sniah-2-1m', 'sniah-3-8k', 'sniah-4-64k', 'sniah-5-1m']);
    for (const task of tasks) {
      expect(Object.keys(task)).toEqual(['id', 'query', 'context', 'expected']);
      expect(task.context.length).toBe(sizeOfId(task.id));
      expect(sniahAnswer(task)).toBe(task.expected);
    }
    expect(existsSync(`${out}.partial`)).toBe(false);
  });

  it('writes an aggregate task set whose expected answers match a recount of the records', async () => {
    const out = join(scratch, 'counts.jsonl');
    expect((await runCli(['batch', 'generate', 'aggregate', '--count', '10', '--seed', '4', '--sizes', '8k,64k', '--out', out])).code).toBe(0);
    const tasks = readTasks(out);
    expect(tasks).toHaveLength(10);
    for (const task of tasks) expect(aggregateAnswer(task).answer).toBe(task.expected);
  });

  it('writes the same bytes for the same seed, and other tasks for another', async () => {
    const generate = async (name: string, seed: string) => {
      const out = join(scratch, name);
      expect((await runCli(['batch', 'generate', 'aggregate', '--count', '4', '--seed', seed, '--sizes', '8k', '--out', out])).code).toBe(0);
      return readFileSync(out);
    };
    const first = await generate('first.jsonl', '17');
    expect((await generate('again.jsonl', '17')).equals(first)).toBe(true);
    expect((await generate('other.jsonl', '18')).equals(first)).toBe(false);
  });

  it('with --context-files, writes each context to a file that context_path names relative to the tasks file', async () => {
    const out = join(scratch, 'files.jsonl');
    expect((await runCli(['batch', 'generate', 'sniah', '--count', '3', '--seed', '2', '--sizes', '8k', '--out', out, '--context-files'])).code).toBe(0);
    const lines = readFileSync(out, 'utf8').trimEnd().split('\n').map((line) => JSON.parse(line) as Record<string, string>);
    expect(lines.map((line) => line.context_path)).toEqual(['files.contexts/sniah-0-8k.txt', 'files.contexts/sniah-1-8k.txt', 'files.contexts/sniah-2-8k.txt']);
    for (const line of lines) {
      expect(line).not.toHaveProperty('context');
      const task = { id: line.id!, query: line.query!, expected: line.expected!, context: readFileSync(join(scratch, line.context_path!), 'utf8') };
      expect(sniahAnswer(task)).toBe(task.expected);
    }
    expect(readdirSync(join(scratch, 'files.contexts'))).toHaveLength(3);
  });

  it.each([
    [['haystack', '--count', '3'], /value 'haystack' is invalid for argument 'kind'\. Allowed choices are sniah, aggregate/],
    [['sniah', '--count', '0'], /'--count <n>' argument '0' is invalid\. expected a whole number greater than 0/],
    [['sniah', '--count', '2', '--seed', 'abc'], /'--seed <n>' argument 'abc' is invalid\. expected a whole number of 0 or more, e\.g\. --seed 1/],
    [['sniah', '--count', '2', '--sizes', '12q'], /"12q" is not a size: write sizes as characters with an optional k or m suffix, comma-separated, e\.g\. 8k,64k,1m/],
    [['aggregate', '--count', '2', '--sizes', '8k,20m'], /Size 20m is out of range: write a size from 1k to 10m/],
  ])('rlm batch generate %j is a usage error that says what to write, and writes nothing', async (args, message) => {
    const out = join(scratch, `bad-${args.join('_')}.jsonl`);
    const result = await runCli(['batch', 'generate', ...args, '--out', out]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(message);
    expect(existsSync(out)).toBe(false);
    expect(existsSync(`${out}.partial`)).toBe(false);
  });
});
