import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadScorer, SCORERS, type ScoreInput } from '../../src/index.js';
import { tempFolder } from '../temp-folder.js';

const input = (answer: string, expected: unknown, output?: unknown): ScoreInput => ({ answer, output, expected, task: { id: 't', query: 'q' } });

describe('scorers', () => {
  it('exact: trimmed, case and whitespace folded; an expected array lists right answers', () => {
    expect(SCORERS.exact(input('  Paris \n', 'paris'))).toBe(true);
    expect(SCORERS.exact(input('New   York', 'new york'))).toBe(true);
    expect(SCORERS.exact(input('Paris, France', 'Paris'))).toBe(false);
    expect(SCORERS.exact(input('NYC', ['New York', 'nyc']))).toBe(true);
  });

  it('contains: the folded expected text anywhere in the answer', () => {
    expect(SCORERS.contains(input('The code is ABC-123.', 'abc-123'))).toBe(true);
    expect(SCORERS.contains(input('The code is ABC-124.', 'ABC-123'))).toBe(false);
  });

  it('number: the answer, or the last number in it, equal within a tolerance', () => {
    expect(SCORERS.number(input('42', 42))).toBe(true);
    expect(SCORERS.number(input('There are 1,204 records.', '1204'))).toBe(true);
    expect(SCORERS.number(input('0.30000000000000004', 0.3))).toBe(true);
    expect(SCORERS.number(input('about 41', 42))).toBe(false);
    expect(SCORERS.number(input('none', 0))).toBe(false);
  });

  it('json: deep equality of the output (or the answer parsed), key order aside', () => {
    expect(SCORERS.json(input('{"b":2,"a":[1]}', { a: [1], b: 2 }))).toBe(true);
    expect(SCORERS.json(input('ignored', { a: 1 }, { a: 1 }))).toBe(true);
    expect(SCORERS.json(input('{"a":"1"}', { a: 1 }))).toBe(false);
  });

  it('loads a module that exports score(), and refuses unknown names and modules without one', async () => {
    const folder = tempFolder('rlm-scorer-');
    const file = join(folder, 'scorer.ts');
    writeFileSync(file, 'export function score({ answer, expected }: { answer: string; expected: string }): number { return answer.length === expected.length ? 0.5 : 0; }\n');
    const score = await loadScorer(file);
    expect(await score(input('abc', 'xyz'))).toBe(0.5);
    await expect(loadScorer('fuzzy')).rejects.toThrow(/Unknown scorer "fuzzy"/);
    const empty = join(folder, 'empty.mjs');
    writeFileSync(empty, 'export const nothing = 1;\n');
    await expect(loadScorer(empty)).rejects.toThrow(/exports no score function/);
  });
});
