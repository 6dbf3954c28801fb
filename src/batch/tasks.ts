import { accessSync, constants, readFileSync, statSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { z } from 'zod';
import { ApiError } from '../api/errors.js';
import { outputOf, parseRequest, questionAndContext } from '../api/request.js';
import { splitModelName } from '../api/chat-completions.js';
import { checkOutputSchema, type OutputSchemaSpec } from '../engine/output-schema.js';
import { ConfigurationError } from '../errors.js';

/** A task line in rlm's own shape. Exactly one of `context`, `context_path`, `context_paths` (or none: an empty context). */
export interface RlmTaskLine {
  id: string | number;
  query: string;
  context?: unknown;
  /** A file or folder, read as `rlm run --context` reads it, relative to the data folder. */
  context_path?: string;
  /** Several files or folders: the context is the array of their values. */
  context_paths?: string[];
  /** The right answer, for the scorer. */
  expected?: unknown;
  model?: string;
  sub_model?: string;
  /** JSON Schema of the answer: the result's `output` is the checked value. */
  output_schema?: Record<string, unknown>;
  max_iterations?: number;
}

/** A line of the OpenAI Batch API's input file; the body is read as `rlm serve` reads a chat completion request. */
export interface OpenAIBatchLine {
  custom_id: string;
  method: 'POST';
  url: '/v1/chat/completions';
  body: Record<string, unknown>;
}

export type TaskLine = RlmTaskLine | OpenAIBatchLine;

/** A task, checked and ready to run. */
export interface BatchTask {
  id: string;
  query: string;
  /** The inline context (or, for OpenAI lines, the one the request's messages give). */
  context: unknown;
  /** Absolute paths to read the context from when the task starts, as `rlm run --context` reads them (then `context` is unused). */
  contextPaths: string[] | undefined;
  expected: unknown;
  hasExpected: boolean;
  model: string | undefined;
  subModel: string | undefined;
  outputSchema: OutputSchemaSpec | undefined;
  maxIterations: number | undefined;
  /** `openai`: the line was an OpenAI Batch API request, and its result is written in that API's output shape. */
  shape: 'rlm' | 'openai';
  /** For OpenAI lines: the model name the request gave, for the response body. */
  requestModel: string | undefined;
}

const rlmLineSchema = z
  .object({
    id: z.union([z.string().min(1, 'id is empty'), z.number()], 'id must be a string or a number'),
    query: z.string('missing "query": each task needs the question to ask').refine((query) => query.trim() !== '', 'query is empty'),
    context: z.unknown().optional(),
    context_path: z.string().min(1).optional(),
    context_paths: z.array(z.string().min(1)).min(1).optional(),
    expected: z.unknown().optional(),
    model: z.string().min(1).optional(),
    sub_model: z.string().min(1).optional(),
    output_schema: z.record(z.string(), z.unknown()).optional(),
    max_iterations: z.number().int().positive().optional(),
  })
  .passthrough();

const openAILineSchema = z.object({
  custom_id: z.string().min(1, 'custom_id is empty'),
  method: z.literal('POST', 'method must be "POST"'),
  url: z.literal('/v1/chat/completions', 'url must be "/v1/chat/completions" (the one endpoint a batch runs)'),
  body: z.record(z.string(), z.unknown(), 'body must be a chat completion request object'),
});

/** Tasks readTasksFile checked: runBatch does not check them again. */
const checkedTasks = new WeakSet<object>();

export function isCheckedTask(value: object): value is BatchTask {
  return checkedTasks.has(value);
}

/** Where task lines are read from: the folder paths are relative to, and the ids seen so far. */
export interface TaskReader {
  dataDir: string;
  /**
   * false: context paths are taken as written, unchecked: with `rlm batch --queue` the workers read
   * them against their own --data-dir, and this machine may not have the files. @default true
   */
  checkPaths?: boolean;
  seenIds: Set<string>;
}

/**
 * Checks one task line and makes it a task; a problem is a ConfigurationError that starts with
 * `where` (e.g. "tasks.jsonl line 4"). Context files are checked for readability here, and read
 * when the task starts.
 */
export function readTaskLine(line: unknown, where: string, reader: TaskReader): BatchTask {
  const problem = (message: string) => new ConfigurationError(`${where}: ${message}`);
  if (line === null || typeof line !== 'object' || Array.isArray(line)) throw problem('a task must be a JSON object');
  const task = 'custom_id' in line ? openAITask(line, problem) : rlmTask(line, reader, problem);
  if (reader.seenIds.has(task.id)) throw problem(`duplicate id "${task.id}": every task needs its own id (results are matched by it)`);
  reader.seenIds.add(task.id);
  return task;
}

type Problem = (message: string) => ConfigurationError;

function firstIssue(error: z.ZodError): string {
  const issue = error.issues[0]!;
  const path = issue.path.join('.');
  return path && !issue.message.includes(path) ? `${path}: ${issue.message}` : issue.message;
}

function rlmTask(line: object, { dataDir, checkPaths = true }: TaskReader, problem: Problem): BatchTask {
  const parsed = rlmLineSchema.safeParse(line);
  if (!parsed.success) throw problem(firstIssue(parsed.error));
  const fields = parsed.data;
  const sources = [fields.context !== undefined, fields.context_path !== undefined, fields.context_paths !== undefined].filter(Boolean).length;
  if (sources > 1) throw problem('give one of "context", "context_path" or "context_paths", not several');
  const given = fields.context_paths ?? (fields.context_path === undefined ? undefined : [fields.context_path]);
  const contextPaths = checkPaths ? given?.map((path) => readablePath(path, dataDir, problem)) : given;
  if (fields.output_schema !== undefined) {
    try {
      checkOutputSchema(fields.output_schema);
    } catch (error) {
      throw problem(`output_schema: ${(error as Error).message}`);
    }
  }
  return {
    id: String(fields.id),
    query: fields.query,
    context: fields.context ?? '',
    contextPaths,
    expected: fields.expected,
    hasExpected: fields.expected !== undefined,
    model: fields.model,
    subModel: fields.sub_model,
    outputSchema: fields.output_schema,
    maxIterations: fields.max_iterations,
    shape: 'rlm',
    requestModel: undefined,
  };
}

/** An OpenAI Batch line: its body goes through the same checks as a request to `rlm serve`. */
function openAITask(line: object, problem: Problem): BatchTask {
  const parsed = openAILineSchema.safeParse(line);
  if (!parsed.success) throw problem(firstIssue(parsed.error));
  const { custom_id: id, body } = parsed.data;
  try {
    const request = parseRequest(body);
    if (request.tools?.length) throw problem('the request has tools: a batch has no caller to run them, so leave them out');
    const { query, context } = questionAndContext(request);
    const models = splitModelName(request.model, request.rlm_sub_model);
    const expected = (line as { expected?: unknown }).expected;
    return {
      id,
      query,
      context,
      contextPaths: undefined,
      expected,
      hasExpected: expected !== undefined,
      model: models.root,
      subModel: models.sub,
      outputSchema: outputOf(request),
      maxIterations: undefined,
      shape: 'openai',
      requestModel: request.model,
    };
  } catch (error) {
    if (error instanceof ApiError) throw problem(`body: ${error.message}`);
    throw error;
  }
}

/** An absolute path that exists and can be read: a missing file is the task file's mistake, found before anything runs. */
function readablePath(path: string, dataDir: string, problem: Problem): string {
  const full = isAbsolute(path) ? path : resolve(dataDir, path);
  try {
    statSync(full);
    accessSync(full, constants.R_OK);
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'not found' : `cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`;
    throw problem(`context path ${path} ${reason} (paths are relative to ${dataDir}; set the folder with --data-dir)`);
  }
  return full;
}

/**
 * Reads and checks a whole tasks file (JSON Lines; blank lines skipped): every problem is found
 * here, before any model call, and names its line. Paths are relative to `dataDir` (default: the
 * file's folder).
 */
export function readTasksFile(path: string, options: { dataDir?: string | undefined; checkPaths?: boolean } = {}): BatchTask[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigurationError(`Cannot read the tasks file ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}.`);
  }
  const reader: TaskReader = { dataDir: resolve(options.dataDir ?? dirname(path)), seenIds: new Set(), ...(options.checkPaths === false && { checkPaths: false }) };
  const tasks: BatchTask[] = [];
  for (const [index, line] of text.split('\n').entries()) {
    if (line.trim() === '') continue;
    const where = `${path} line ${index + 1}`;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (error) {
      throw new ConfigurationError(`${where}: not valid JSON (${(error as Error).message})`);
    }
    const task = readTaskLine(value, where, reader);
    checkedTasks.add(task);
    tasks.push(task);
  }
  if (tasks.length === 0) throw new ConfigurationError(`${path} holds no tasks: write one JSON object per line, e.g. {"id": "1", "query": "...", "context": "..."}`);
  return tasks;
}
