import { randomUUID } from 'node:crypto';
import { completionOf } from '../api/chat-responses.js';
import { failureAsApiError } from '../api/errors.js';
import { DEFAULTS } from '../defaults.js';
import type { RlmEvent, RlmResult } from '../engine/events.js';
import { RunFailedError } from '../engine/limits.js';
import { RLM, type RLMOptions } from '../engine/rlm.js';
import { MemorySpendAccount, type SpendAccount } from '../engine/spend-account.js';
import { ConfigurationError, describeError, RlmError } from '../errors.js';
import { loadContexts } from '../inputs/contexts.js';
import { ModelScheduler } from '../lm/scheduler.js';
import type { UsageSummary } from '../lm/usage.js';
import { mayPassOnRetry } from './failures.js';
import { readResults, ResultsFile, type ResultLine, type TaskRecord, type TaskUsage } from './results.js';
import { scoreOf, SCORERS, type Scorer, type ScorerName } from './scorers.js';
import { summarize, type BatchSummary } from './summary.js';
import { isCheckedTask, readTaskLine, type BatchTask, type TaskLine, type TaskReader } from './tasks.js';

/** What a batch reports as it goes. */
export type BatchEvent =
  | { type: 'task-start'; id: string }
  /** A task finished (its record is written); `record.status` says how. */
  | { type: 'task-end'; record: TaskRecord }
  /** A task the results file already has: completed, or failed without `retryFailed`. */
  | { type: 'task-skipped'; record: TaskRecord }
  /** Something about a task worth knowing that does not stop it (a context file read as Latin-1). */
  | { type: 'notice'; id: string; text: string };

export interface RunBatchOptions extends Omit<RLMOptions, 'model' | 'maxBudgetUsd' | 'scheduler' | 'spendAccount'> {
  /** Root model of tasks that name none. */
  model: string;
  /** Task lines (rlm's shape or OpenAI Batch API lines) or tasks from `readTasksFile`. An array is checked whole before anything runs. */
  tasks: Iterable<TaskLine | BatchTask> | AsyncIterable<TaskLine | BatchTask>;
  /** The results file: finished tasks are appended to it, and tasks it holds as completed are skipped. */
  out?: string;
  /** Tasks running at once. @default DEFAULTS.batch.concurrency */
  concurrency?: number;
  /** Stops starting tasks and stops running ones; their results are not written (a rerun runs them). */
  signal?: AbortSignal;
  onResult?: (record: TaskRecord) => void;
  /**
   * Each finished task's line as the results file gets it (rlm's or the OpenAI Batch shape), and
   * what failed, for callers that store results elsewhere (a queue worker hands them to Redis).
   */
  onLine?: (line: ResultLine, failure: unknown) => void;
  onEvent?: (event: BatchEvent) => void;
  /** USD for the whole batch: no task starts once it is spent, and running tasks share what is left. Needs prices. */
  maxBudgetUsd?: number;
  /**
   * @internal The per-model request queue the batch's tasks share, instead of a new one of
   * `maxConcurrency` slots: batches given the same one share its limit and its retry-after pauses
   * (a queue worker runs each job as a batch of one, all on its one scheduler; see workerTaskRunner).
   */
  scheduler?: ModelScheduler;
  /** The account the batch spends from, instead of one in memory of `maxBudgetUsd` (e.g. one shared by several machines). */
  spendAccount?: SpendAccount;
  /** USD one task may spend (its run's maxBudgetUsd). */
  taskBudgetUsd?: number;
  /** How answers of tasks with `expected` are scored. @default 'exact' */
  scorer?: ScorerName | Scorer;
  /** Runs again the tasks whose last result failed. @default false */
  retryFailed?: boolean;
  /**
   * Tries of a task whose failure may pass (an upstream still failing after rlm's own retries of
   * each request, a sandbox process that died); other failures are final at once. @default DEFAULTS.batch.attempts
   */
  attempts?: number;
  /** Where relative context paths of task lines are read from. @default the working directory */
  dataDir?: string;
}

/** The summary of a batch, and why it stopped early, if it did. */
export interface BatchResult extends BatchSummary {
  /** `budget`: the batch budget was spent; `signal`: the caller stopped it; null: every task was run. */
  stoppedBy: 'budget' | 'signal' | null;
}

/**
 * Runs many (context, question) tasks, a few at once, and returns the summary. Results are appended
 * to `out` as tasks finish, so a batch stopped by a crash or Ctrl-C goes on where it was when run
 * again. Every task's requests share one queue per model (`maxConcurrency`) and one backoff after a
 * server's retry-after; `maxBudgetUsd` holds for the batch.
 *
 * @example
 * const summary = await runBatch({ model: 'gpt-5-mini', tasks: [{ id: '1', query: 'Who signed?', context: text }], out: 'results.jsonl' });
 */
export async function runBatch(options: RunBatchOptions): Promise<BatchResult> {
  const batch = new BatchRun(options);
  return batch.run();
}

class BatchRun {
  readonly #options: RunBatchOptions;
  readonly #rlmOptions: Omit<RLMOptions, 'model'>;
  readonly #scheduler: ModelScheduler;
  readonly #account: SpendAccount | undefined;
  readonly #scorer: Scorer;
  readonly #rlms = new Map<string, RLM>();
  readonly #records = new Map<string, TaskRecord>();
  readonly #ids: string[] = [];
  readonly #scoredIds = new Set<string>();
  readonly #reader: TaskReader;
  #previous = new Map<string, TaskRecord>();
  #results: ResultsFile | undefined;
  #stoppedBy: BatchResult['stoppedBy'] = null;

  constructor(options: RunBatchOptions) {
    const { tasks, out, concurrency, signal, onResult, onLine, onEvent, maxBudgetUsd, spendAccount, scheduler, taskBudgetUsd, scorer, retryFailed, dataDir, attempts, ...rlmOptions } = options;
    this.#options = options;
    this.#scheduler = scheduler ?? new ModelScheduler(rlmOptions.maxConcurrency ?? DEFAULTS.lm.maxConcurrency);
    this.#account = spendAccount ?? (maxBudgetUsd === undefined ? undefined : new MemorySpendAccount(maxBudgetUsd));
    this.#rlmOptions = { ...rlmOptions, ...(taskBudgetUsd !== undefined && { maxBudgetUsd: taskBudgetUsd }) };
    this.#scorer = typeof scorer === 'function' ? scorer : SCORERS[scorer ?? 'exact'];
    this.#reader = { dataDir: dataDir ?? process.cwd(), seenIds: new Set() };
    if (!(Number.isInteger(concurrency ?? 1) && (concurrency ?? 1) >= 1)) throw new ConfigurationError(`concurrency must be a whole number >= 1, got ${concurrency}`);
    if (!(Number.isInteger(attempts ?? 1) && (attempts ?? 1) >= 1)) throw new ConfigurationError(`attempts must be a whole number >= 1, got ${attempts}`);
  }

  async run(): Promise<BatchResult> {
    const { tasks, out } = this.#options;
    // An array is checked whole (lines, models, prices) before any model call.
    const source = Symbol.iterator in tasks ? eachOf(await this.#checkAll([...tasks])) : this.#checkEach(tasks);
    if (out) {
      this.#previous = readResults(out);
      this.#results = new ResultsFile(out);
    }
    try {
      const queue = source[Symbol.asyncIterator]();
      const workers = Array.from({ length: this.#options.concurrency ?? DEFAULTS.batch.concurrency }, () => this.#work(queue));
      await Promise.all(workers);
    } finally {
      this.#results?.close();
    }
    if (this.#options.signal?.aborted) this.#stoppedBy = 'signal';
    const records = this.#ids.flatMap((id) => this.#records.get(id) ?? []);
    return { ...summarize(records, this.#ids.length, this.#scoredIds), stoppedBy: this.#stoppedBy };
  }

  /** Checks every task, and builds and prepares each RLM they need (models, prices, setup files, tools). */
  async #checkAll(lines: (TaskLine | BatchTask)[]): Promise<BatchTask[]> {
    const tasks = lines.map((line, index) => this.#checked(line, index));
    for (const task of tasks) this.#rlmFor(task);
    for (const rlm of this.#rlms.values()) {
      for (const warning of (await rlm.prepare()).warnings) this.#options.onEvent?.({ type: 'notice', id: '', text: warning });
    }
    return tasks;
  }

  async *#checkEach(lines: AsyncIterable<TaskLine | BatchTask>): AsyncGenerator<BatchTask> {
    let index = 0;
    for await (const line of lines) yield this.#checked(line, index++);
  }

  /** Checks a task as it is read, and counts it into the batch. */
  #checked(line: TaskLine | BatchTask, index: number): BatchTask {
    let task: BatchTask;
    if (isCheckedTask(line)) {
      task = line as BatchTask;
      if (this.#reader.seenIds.has(task.id)) throw new ConfigurationError(`task ${index + 1}: duplicate id "${task.id}": every task needs its own id`);
      this.#reader.seenIds.add(task.id);
    } else {
      task = readTaskLine(line, `task ${index + 1}`, this.#reader);
    }
    this.#ids.push(task.id);
    if (task.hasExpected) this.#scoredIds.add(task.id);
    return task;
  }

  /** One of the batch's workers: takes the next task until there are none, the budget is spent, or the batch is stopped. */
  async #work(queue: AsyncIterator<BatchTask>): Promise<void> {
    for (;;) {
      if (this.#stopping()) return;
      const next = await queue.next();
      if (next.done) return;
      const task = next.value;
      const previous = this.#previous.get(task.id);
      if (previous && (previous.status === 'completed' || !this.#options.retryFailed)) {
        this.#records.set(task.id, previous);
        this.#options.onEvent?.({ type: 'task-skipped', record: previous });
        continue;
      }
      if (this.#account && (await this.#account.remaining()) <= 0) {
        this.#stoppedBy = 'budget';
        return;
      }
      if (this.#stopping()) return;
      await this.#runTask(task, previous);
    }
  }

  #stopping(): boolean {
    return this.#stoppedBy !== null || Boolean(this.#options.signal?.aborted);
  }

  async #runTask(task: BatchTask, previous: TaskRecord | undefined): Promise<void> {
    const { signal, onEvent, onResult } = this.#options;
    onEvent?.({ type: 'task-start', id: task.id });
    const tries = this.#options.attempts ?? DEFAULTS.batch.attempts;
    let record: TaskRecord | undefined;
    let failure: unknown;
    for (let attempt = 1; attempt <= tries; attempt++) {
      ({ record, failure } = await this.#try(task, (previous?.attempts ?? 0) + attempt));
      // A task stopped with the batch has no result: a rerun runs it.
      if (signal?.aborted) return;
      if (record.status === 'completed' || attempt === tries || !mayPassOnRetry(failure) || this.#stopping()) break;
      onEvent?.({ type: 'notice', id: task.id, text: `try ${attempt} of ${tries} failed (${record.error?.message ?? 'no reason'}): trying again` });
    }
    this.#records.set(task.id, record!);
    const line = lineOf(task, record!, failure);
    this.#results?.append(line);
    this.#options.onLine?.(line, failure);
    onEvent?.({ type: 'task-end', record: record! });
    onResult?.(record!);
  }

  /** One try of a task: its record, and what failed when it did. */
  async #try(task: BatchTask, attempts: number): Promise<{ record: TaskRecord; failure?: unknown }> {
    const { signal, onEvent } = this.#options;
    const started = performance.now();
    const progress = { iterations: 0 };
    try {
      const context = task.contextPaths ? await loadContexts({ sources: task.contextPaths, notice: (text) => onEvent?.({ type: 'notice', id: task.id, text }) }) : task.context;
      const result = await finalResult(this.#rlmFor(task).stream({ context, query: task.query, signal, ...(task.outputSchema && { output: task.outputSchema }) }), progress);
      return { record: await this.#completed(task, result, attempts) };
    } catch (error) {
      return { record: failedRecord(task, error, { attempts, iterations: progress.iterations, durationMs: performance.now() - started }), failure: error };
    }
  }

  async #completed(task: BatchTask, result: RlmResult, attempts: number): Promise<TaskRecord> {
    const record: TaskRecord = {
      id: task.id,
      status: 'completed',
      answer: result.response,
      ...(result.output !== undefined && { output: result.output }),
      usage: taskUsage(result.usage),
      cost_usd: result.usage.costUsd,
      iterations: result.iterations,
      forced: result.forced,
      duration_ms: Math.round(result.durationMs),
      ...(result.logPath && { log_path: result.logPath }),
      attempts,
    };
    if (!task.hasExpected) return record;
    const scored = await scoreOf(this.#scorer, { answer: result.response, output: result.output, expected: task.expected, task: { id: task.id, query: task.query } });
    return 'score' in scored ? { ...record, score: scored.score } : { ...record, score: 0, score_error: scored.problem };
  }

  /** One RLM per model pair and iteration limit, all sharing the batch's scheduler and account. */
  #rlmFor(task: BatchTask): RLM {
    const model = task.model ?? this.#options.model;
    const subModel = task.subModel ?? this.#rlmOptions.subModel;
    const key = JSON.stringify([model, subModel, task.maxIterations]);
    let rlm = this.#rlms.get(key);
    if (!rlm) {
      const perTask = { model, ...(subModel && { subModel }), ...(task.maxIterations && { maxIterations: task.maxIterations }) };
      rlm = new RLM({ ...this.#rlmOptions, ...perTask, scheduler: this.#scheduler, ...(this.#account && { spendAccount: this.#account }) });
      this.#rlms.set(key, rlm);
    }
    return rlm;
  }
}

/** Consumes a run's events to its result, counting root iterations for the record of a run that fails. */
async function finalResult(events: AsyncIterable<RlmEvent>, progress: { iterations: number }): Promise<RlmResult> {
  for await (const event of events) {
    if (event.type === 'iteration-start' && event.depth === 0) progress.iterations++;
    if (event.type === 'run-end') return event.result;
  }
  throw new RlmError('internal_error', 'The run ended without a result or an error. This is a bug in rlm: please report it.');
}

export function failedRecord(task: BatchTask, error: unknown, { attempts, iterations, durationMs }: { attempts: number; iterations: number; durationMs: number }): TaskRecord {
  const failure = error instanceof RunFailedError ? error : undefined;
  const usage = failure?.usage;
  return {
    id: task.id,
    status: 'failed',
    answer: null,
    ...(failure?.partialAnswer && { partial_answer: failure.partialAnswer }),
    error: { code: error instanceof RlmError ? error.code : 'run_failed', message: describeError(error).message },
    ...(task.hasExpected && { score: 0 }),
    usage: usage ? taskUsage(usage) : { calls: 0, input_tokens: 0, output_tokens: 0, by_model: {} },
    cost_usd: usage ? usage.costUsd : 0,
    iterations,
    forced: false,
    duration_ms: Math.round(durationMs),
    ...(failure?.logPath && { log_path: failure.logPath }),
    attempts,
  };
}

function taskUsage(usage: UsageSummary): TaskUsage {
  const byModel: TaskUsage['by_model'] = {};
  for (const [model, entry] of Object.entries(usage.byModel)) {
    byModel[model] = { calls: entry.calls, input_tokens: entry.inputTokens, output_tokens: entry.outputTokens, cost_usd: entry.costUsd };
  }
  return { calls: usage.calls, input_tokens: usage.inputTokens, output_tokens: usage.outputTokens, by_model: byModel };
}

/** The line a record is written as: rlm's shape, or the OpenAI Batch API's output shape for tasks that came in that API's input shape. */
export function lineOf(task: BatchTask, record: TaskRecord, failure: unknown): ResultLine {
  if (task.shape !== 'openai') return record;
  const { id, ...rest } = record;
  const spent = { usage: { prompt_tokens: record.usage.input_tokens, completion_tokens: record.usage.output_tokens, total_tokens: record.usage.input_tokens + record.usage.output_tokens }, costUsd: record.cost_usd };
  const model = task.requestModel ?? task.model ?? '';
  let response: { status_code: number; body: unknown };
  if (record.status === 'completed') {
    const step = { type: 'answer' as const, answer: record.answer ?? '', forced: record.forced, structured: task.outputSchema !== undefined, iterations: record.iterations };
    response = { status_code: 200, body: completionOf(step, model, spent) };
  } else {
    const error = failureAsApiError(failure);
    response = { status_code: error.status, body: error.toJSON() };
  }
  return { id: `batch_req_${randomUUID().replaceAll('-', '')}`, custom_id: id, response: { ...response, request_id: `req_${randomUUID().replaceAll('-', '')}` }, error: null, rlm: rest };
}

async function* eachOf<T>(items: T[]): AsyncGenerator<T> {
  yield* items;
}
