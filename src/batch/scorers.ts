import { isDeepStrictEqual } from 'node:util';
import { ConfigurationError, RlmError } from '../errors.js';
import { importModuleFile } from '../tools/setup-files.js';

/** What a scorer is given for one completed task that has `expected`. */
export interface ScoreInput {
  answer: string;
  /** The checked value, for tasks with an output schema. */
  output: unknown;
  expected: unknown;
  /** The task as the line gave it (id, query, ...). */
  task: { id: string; query: string };
}

/** Scores an answer: true or 1 right, false or 0 wrong, or a number between. */
export type Scorer = (input: ScoreInput) => number | boolean | Promise<number | boolean>;

export type ScorerName = 'exact' | 'contains' | 'number' | 'json';

/** Case, surrounding space and runs of whitespace do not count. */
function folded(text: unknown): string {
  return String(text).trim().toLowerCase().replace(/\s+/g, ' ');
}

/** An `expected` array lists answers that are all right. */
function anyOf(expected: unknown): unknown[] {
  return Array.isArray(expected) ? expected : [expected];
}

/** The number an answer gives: the whole answer when it is one, else the last number in it ("about 1,204 items" -> 1204). */
function numberIn(answer: string): number | undefined {
  const plain = answer.trim().replace(/,(?=\d{3}\b)/g, '');
  if (plain !== '' && Number.isFinite(Number(plain))) return Number(plain);
  const found = plain.match(/-?\d+(?:\.\d+)?(?:e[+-]?\d+)?/gi);
  return found ? Number(found.at(-1)) : undefined;
}

/** Numbers are equal within a relative tolerance of one in a million (floats printed by models drift). */
function sameNumber(actual: number, expected: number): boolean {
  return Math.abs(actual - expected) <= Math.max(1e-9, Math.abs(expected) * 1e-6);
}

/** The built-in scorers, by name. */
export const SCORERS: Record<ScorerName, Scorer> = {
  exact: ({ answer, expected }) => anyOf(expected).some((value) => folded(answer) === folded(value)),
  contains: ({ answer, expected }) => anyOf(expected).some((value) => folded(answer).includes(folded(value))),
  number: ({ answer, expected }) => {
    const actual = numberIn(answer);
    return actual !== undefined && anyOf(expected).some((value) => sameNumber(actual, Number(value)));
  },
  json: ({ answer, output, expected }) => isDeepStrictEqual(output !== undefined ? output : parsedOrText(answer), expected),
};

function parsedOrText(answer: string): unknown {
  try {
    return JSON.parse(answer);
  } catch {
    return answer;
  }
}

/**
 * A scorer by name (exact, contains, number, json) or from a module file (.js, .mjs, .ts) that
 * exports `score` (or a default function).
 */
export async function loadScorer(spec: string): Promise<Scorer> {
  if (spec in SCORERS) return SCORERS[spec as ScorerName];
  if (!/\.(m?[jt]s|cjs|cts)$/.test(spec)) {
    throw new ConfigurationError(`Unknown scorer "${spec}": use exact, contains, number, json, or a module file exporting score({ answer, output, expected, task }).`);
  }
  let module: Record<string, unknown>;
  try {
    module = await importModuleFile(spec, 'Scorer file');
  } catch (error) {
    if (error instanceof RlmError) throw new ConfigurationError(`--scorer ${spec}: ${error.message}`);
    throw error;
  }
  const score = module.score ?? module.default;
  if (typeof score !== 'function') throw new ConfigurationError(`--scorer ${spec}: the module exports no score function: export function score({ answer, output, expected, task }) { ... }.`);
  return score as Scorer;
}

/**
 * Runs a scorer on one answer: a number is kept (NaN and infinities refused), a boolean is 1 or 0.
 * A scorer that throws or returns anything else is reported, as the score of that task, not
 * the batch's end.
 */
export async function scoreOf(scorer: Scorer, input: ScoreInput): Promise<{ score: number } | { problem: string }> {
  try {
    const value = await scorer(input);
    if (typeof value === 'boolean') return { score: value ? 1 : 0 };
    if (typeof value === 'number' && Number.isFinite(value)) return { score: value };
    return { problem: `the scorer returned ${typeof value === 'number' ? String(value) : typeof value}, not a number or a boolean` };
  } catch (error) {
    return { problem: `the scorer failed: ${(error as Error)?.message ?? String(error)}` };
  }
}
