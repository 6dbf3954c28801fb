import { closeSync, existsSync, fdatasyncSync, ftruncateSync, mkdirSync, openSync, readFileSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { ConfigurationError } from '../errors.js';

/** Tokens and calls of one task, per model and in all; `cost_usd` null when a model has no price. */
export interface TaskUsage {
  calls: number;
  input_tokens: number;
  output_tokens: number;
  by_model: Record<string, { calls: number; input_tokens: number; output_tokens: number; cost_usd: number | null }>;
}

/** What one finished task left: one line of the results file (rlm's shape). */
export interface TaskRecord {
  id: string;
  status: 'completed' | 'failed';
  /** The answer; null when the task failed (see `partial_answer`). */
  answer: string | null;
  /** The checked value, for tasks with an output schema. */
  output?: unknown;
  /** The best answer a failed run had. */
  partial_answer?: string;
  error?: { code: string; message: string };
  /** From the scorer, for tasks with `expected`: 1 right, 0 wrong, or between. */
  score?: number;
  /** Why the scorer gave no score (it threw, or returned no number): the score is then 0. */
  score_error?: string;
  usage: TaskUsage;
  cost_usd: number | null;
  iterations: number;
  forced: boolean;
  duration_ms: number;
  log_path?: string;
  /** How many times this id has been run, this run included. */
  attempts: number;
}

/**
 * A line in the OpenAI Batch API's output shape, for tasks that came as OpenAI Batch lines, so
 * existing readers work; `rlm` carries the rest of the record (status, cost, score, ...).
 */
export interface OpenAIResultLine {
  id: string;
  custom_id: string;
  response: { status_code: number; request_id: string; body: unknown };
  error: null;
  rlm: Omit<TaskRecord, 'id'>;
}

export type ResultLine = TaskRecord | OpenAIResultLine;

/** The record a line holds, whichever its shape. */
export function recordOf(line: ResultLine): TaskRecord {
  return 'custom_id' in line ? { id: line.custom_id, ...line.rlm } : line;
}

/**
 * Reads a results file: the last line of each id wins (a rerun appends a newer one). A torn last
 * line (the process died while writing it) is ignored; a bad line elsewhere names itself. A file
 * that does not exist yet holds nothing.
 */
export function readResults(path: string): Map<string, TaskRecord> {
  const records = new Map<string, TaskRecord>();
  if (!existsSync(path)) return records;
  const lines = readFileSync(path, 'utf8').split('\n');
  for (const [index, text] of lines.entries()) {
    if (text.trim() === '') continue;
    let record: TaskRecord;
    try {
      record = recordOf(JSON.parse(text) as ResultLine);
      if (typeof record?.id !== 'string' || (record.status !== 'completed' && record.status !== 'failed')) throw new Error('not a task result');
    } catch (error) {
      if (index === lines.length - 1) continue; // torn: no newline was written after it
      throw new ConfigurationError(`${path} line ${index + 1} is not a task result (${(error as Error).message}): is --out the results file of a batch?`);
    }
    records.set(record.id, record);
  }
  return records;
}

/**
 * The results file, open for appending. Every line is written whole and flushed to the disk as its
 * task finishes, so a crash loses no finished task. A torn line a crash left at the end is cut off
 * first, so the next line starts clean.
 */
export class ResultsFile {
  readonly #descriptor: number;

  constructor(readonly path: string) {
    try {
      mkdirSync(dirname(path), { recursive: true });
      this.#descriptor = openSync(path, 'a+');
      cutTornTail(path, this.#descriptor);
    } catch (error) {
      throw new ConfigurationError(`Cannot write the results file ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}. Choose another path with --out.`);
    }
  }

  append(line: ResultLine): void {
    writeSync(this.#descriptor, `${JSON.stringify(line)}\n`);
    fdatasyncSync(this.#descriptor);
  }

  close(): void {
    closeSync(this.#descriptor);
  }
}

function cutTornTail(path: string, descriptor: number): void {
  const text = readFileSync(path);
  if (text.length === 0 || text[text.length - 1] === 0x0a) return;
  ftruncateSync(descriptor, text.lastIndexOf(0x0a) + 1);
}
