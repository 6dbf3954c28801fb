// Reads the results file `rlm batch` writes (one JSON line per finished task, rlm's shape or the
// OpenAI Batch output shape) into one record per task, and sums it up for the batch page. Like the
// trajectory reader it never throws on the file's content: a task is rerun and written again, so the
// last line per id is the task's result; a last line cut off (a crash mid-write) is left out; other
// lines that cannot be read are listed in `problems`.

import { percentile } from '../percentile.js';
import { list, object, optionalNumber, optionalText, text } from './json-values.js';

export interface BatchResults {
  /** One per id, in the order the ids first appear. */
  tasks: TaskResult[];
  /** The last line was cut off while it was being written. */
  tornLastLine: boolean;
  /** Lines that could not be read, and why. */
  problems: string[];
}

export interface ModelTokens {
  calls: number;
  inputTokens: number;
  outputTokens: number;
  /** USD, or null when the model has no known price. */
  costUsd: number | null;
}

export interface TaskResult {
  id: string;
  /** `completed` or `failed` (any other text a line holds is kept, to be shown as it is). */
  status: string;
  answer: string | undefined;
  /** The answer a failed run had got to. */
  partialAnswer: string | undefined;
  error: { code: string; message: string } | undefined;
  /** 0 to 1 (a scorer's `true` / `false` read as 1 / 0); undefined when the task was not scored. */
  score: number | undefined;
  /** USD, or null when some model the task used has no price. */
  costUsd: number | null;
  durationMs: number | undefined;
  iterations: number | undefined;
  forced: boolean;
  /** The task's trajectory, as the batch wrote it (batches run with --log-dir). */
  logPath: string | undefined;
  attempts: number | undefined;
  usageByModel: Record<string, ModelTokens>;
  /** Which line shape the result came in. */
  shape: 'rlm' | 'openai';
}

/**
 * Whether a file's text is a batch results file rather than a trajectory: decided by its first line
 * that is a JSON object (trajectory lines all have a `type`; result lines an `id` and a `status`, or
 * a `custom_id` in the OpenAI Batch shape).
 */
export function isBatchResults(text: string): boolean {
  for (const line of text.split('\n')) {
    const entry = parseObject(line);
    if (!entry) continue;
    if (typeof entry.type === 'string') return false;
    return typeof entry.custom_id === 'string' || (entry.id !== undefined && typeof entry.status === 'string');
  }
  return false;
}

export function readBatchResults(text: string): BatchResults {
  const byId = new Map<string, TaskResult>();
  const results: BatchResults = { tasks: [], tornLastLine: false, problems: [] };
  const lines = text.split('\n');
  const last = lines.findLastIndex((line) => line.trim() !== '');
  lines.forEach((line, index) => {
    if (line.trim() === '') return;
    const entry = parseObject(line);
    if (!entry) {
      if (index === last && !text.endsWith('\n')) results.tornLastLine = true;
      else results.problems.push(`line ${index + 1} is not a JSON object`);
      return;
    }
    const task = typeof entry.custom_id === 'string' ? readOpenAiLine(entry) : readRlmLine(entry);
    if (!task) {
      results.problems.push(`line ${index + 1} has no task id`);
      return;
    }
    // A later line for the same id replaces the earlier one but keeps its place (a Map keeps the first insertion's).
    byId.set(task.id, task);
  });
  results.tasks = [...byId.values()];
  return results;
}

function readRlmLine(entry: Record<string, unknown>): TaskResult | undefined {
  if (entry.id === undefined || entry.id === null) return undefined;
  const usage = object(entry.usage);
  return {
    id: text(entry.id),
    status: text(entry.status) || 'unknown',
    answer: optionalText(entry.answer),
    partialAnswer: optionalText(entry.partial_answer),
    error: readError(entry.error),
    score: readScore(entry.score),
    costUsd: optionalNumber(entry.cost_usd) ?? null,
    durationMs: optionalNumber(entry.duration_ms),
    iterations: optionalNumber(entry.iterations),
    forced: entry.forced === true,
    logPath: optionalText(entry.log_path),
    attempts: optionalNumber(entry.attempts),
    usageByModel: readUsageByModel(usage?.by_model),
    shape: 'rlm',
  };
}

/**
 * `{ id, custom_id, response: { status_code, body }, error }`. `rlm batch` adds its whole record
 * (status, score, usage, log path, ...) as `rlm`: read that when it is there. A file from elsewhere
 * (OpenAI's own batch output) has only the response: the body is a chat.completion.
 */
function readOpenAiLine(entry: Record<string, unknown>): TaskResult {
  const record = object(entry.rlm);
  if (record) return { ...readRlmLine({ ...record, id: entry.custom_id })!, shape: 'openai' };
  const response = object(entry.response);
  const body = object(response?.body);
  const statusCode = optionalNumber(response?.status_code);
  const error = readError(entry.error) ?? readError(body?.error);
  const completed = !error && body !== undefined && (statusCode === undefined || (statusCode >= 200 && statusCode < 300));
  const message = object(object(list(body?.choices)[0])?.message);
  const usage = object(body?.usage);
  const model = optionalText(body?.model) ?? 'model';
  return {
    id: text(entry.custom_id),
    status: completed ? 'completed' : 'failed',
    answer: optionalText(message?.content),
    partialAnswer: undefined,
    error: error ?? (completed ? undefined : { code: statusCode === undefined ? 'no_response' : `http_${statusCode}`, message: 'The request has no completion.' }),
    score: undefined,
    costUsd: null,
    durationMs: undefined,
    iterations: undefined,
    forced: false,
    logPath: undefined,
    attempts: undefined,
    usageByModel: usage
      ? Object.fromEntries([[model, { calls: 1, inputTokens: optionalNumber(usage.prompt_tokens) ?? 0, outputTokens: optionalNumber(usage.completion_tokens) ?? 0, costUsd: null }]])
      : {},
    shape: 'openai',
  };
}

function readError(value: unknown): TaskResult['error'] {
  const error = object(value);
  if (!error) return typeof value === 'string' ? { code: 'error', message: value } : undefined;
  return { code: optionalText(error.code) ?? optionalText(error.type) ?? 'error', message: optionalText(error.message) ?? '' };
}

function readScore(value: unknown): number | undefined {
  if (typeof value === 'boolean') return value ? 1 : 0;
  return optionalNumber(value);
}

/** Built with Object.fromEntries: a model named `__proto__` stays a model, not the record's prototype. */
function readUsageByModel(value: unknown): Record<string, ModelTokens> {
  return Object.fromEntries(
    Object.entries(object(value) ?? {}).map(([model, usage]) => {
      const counts = object(usage) ?? {};
      const tokens: ModelTokens = {
        calls: optionalNumber(counts.calls) ?? 0,
        inputTokens: optionalNumber(counts.input_tokens) ?? 0,
        outputTokens: optionalNumber(counts.output_tokens) ?? 0,
        costUsd: optionalNumber(counts.cost_usd) ?? null,
      };
      return [model, tokens];
    }),
  );
}

function parseObject(line: string): Record<string, unknown> | undefined {
  if (line.trim() === '') return undefined;
  try {
    return object(JSON.parse(line));
  } catch {
    return undefined;
  }
}

export interface Spread {
  /** How many tasks have the value. */
  count: number;
  total: number;
  mean: number | undefined;
  p50: number | undefined;
  p95: number | undefined;
}

function spread(values: number[]): Spread {
  const sorted = [...values].sort((a, b) => a - b);
  const total = sorted.reduce((sum, value) => sum + value, 0);
  return { count: sorted.length, total, mean: sorted.length ? total / sorted.length : undefined, p50: percentile(sorted, 0.5), p95: percentile(sorted, 0.95) };
}

export interface BatchSummary {
  total: number;
  byStatus: Record<string, number>;
  /** Failed tasks per error code. */
  failuresByCode: Record<string, number>;
  /** Mean score over the scored tasks; undefined when none has a score. */
  accuracy: number | undefined;
  scored: number;
  /** Over the tasks whose cost is known; `costUnknown` counts the others. */
  cost: Spread;
  costUnknown: number;
  duration: Spread;
  iterations: Spread;
  forced: number;
  /** Calls and tokens per model over every task. */
  tokensByModel: Record<string, ModelTokens>;
}

export function summarizeBatch(tasks: TaskResult[]): BatchSummary {
  const count = (keys: string[]) => keys.reduce<Map<string, number>>((counts, key) => counts.set(key, (counts.get(key) ?? 0) + 1), new Map());
  const numbers = (pick: (task: TaskResult) => number | null | undefined) => tasks.map(pick).filter((value): value is number => typeof value === 'number');
  const scores = numbers((task) => task.score);
  const costs = numbers((task) => task.costUsd);
  return {
    total: tasks.length,
    byStatus: Object.fromEntries(count(tasks.map((task) => task.status))),
    failuresByCode: Object.fromEntries(count(tasks.filter((task) => task.status !== 'completed').map((task) => task.error?.code ?? 'unknown'))),
    accuracy: scores.length ? scores.reduce((sum, score) => sum + score, 0) / scores.length : undefined,
    scored: scores.length,
    cost: spread(costs),
    costUnknown: tasks.length - costs.length,
    duration: spread(numbers((task) => task.durationMs)),
    iterations: spread(numbers((task) => task.iterations)),
    forced: tasks.filter((task) => task.forced).length,
    tokensByModel: tokensByModel(tasks),
  };
}

function tokensByModel(tasks: TaskResult[]): Record<string, ModelTokens> {
  const totals = new Map<string, ModelTokens>();
  for (const [model, usage] of tasks.flatMap((task) => Object.entries(task.usageByModel))) {
    const total = totals.get(model) ?? { calls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0 };
    total.calls += usage.calls;
    total.inputTokens += usage.inputTokens;
    total.outputTokens += usage.outputTokens;
    // One task without a price makes the model's total unknown: a partial sum would read as the whole.
    total.costUsd = total.costUsd === null || usage.costUsd === null ? null : total.costUsd + usage.costUsd;
    totals.set(model, total);
  }
  return Object.fromEntries(totals);
}
