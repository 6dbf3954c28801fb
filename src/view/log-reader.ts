// Reads a JSONL trajectory (rlm's, or the reference Python RLM logger's: the same schema, without
// rlm's additions) into a typed run tree for display. It never throws on a log's content: what it
// cannot read is listed in `problems`, and a log cut off mid-line (a crash, a run still writing)
// is read up to there.

import { list, object, optionalNumber, optionalText, text } from './json-values.js';

export interface RunLog {
  metadata: LogMetadata | undefined;
  iterations: IterationView[];
  /** Root conversations replaced by a summary to fit the model's context window. */
  compactions: CompactionView[];
  /** How the run ended (rlm's `run_end` line); undefined when the log has none. */
  end: RunEndView | undefined;
  /** The last line was cut off, or the run has not written its end yet. */
  endsEarly: boolean;
  /** Lines that could not be read, and why. */
  problems: string[];
}

interface LogMetadata {
  /** The run's question (rlm logs only). */
  query: string | undefined;
  rootModel: string | undefined;
  otherModels: string[];
  maxDepth: number | undefined;
  maxIterations: number | undefined;
  environment: string | undefined;
  timestamp: string | undefined;
  /** The JSON Schema the answer had to match (rlm logs of runs given one). */
  outputSchema: Record<string, unknown> | undefined;
}

/** A final answer refused because it did not match the output schema, and why. */
export interface RejectedFinalView {
  answer: string;
  problems: string[];
}

export interface IterationView {
  index: number;
  prompt: unknown[];
  response: string;
  blocks: BlockView[];
  finalAnswer: string | null;
  /** The answer that ended the turn but did not match the output schema. */
  rejectedFinal: RejectedFinalView | undefined;
  durationMs: number | undefined;
}

export interface BlockView {
  code: string;
  stdout: string;
  stderr: string;
  /** Variable name to a short type description. */
  variables: Record<string, string>;
  durationMs: number | undefined;
  finalAnswer: string | null;
  /** FINAL values the block gave that did not match the output schema (none in older logs). */
  rejectedFinals: RejectedFinalView[];
  subcalls: SubcallView[];
  toolCalls: ToolCallView[];
}

export interface SubcallView {
  model: string | undefined;
  prompt: unknown;
  response: string;
  durationMs: number | undefined;
  /** Per model: calls and tokens. */
  usage: Record<string, { calls: number; inputTokens: number; outputTokens: number }>;
  error: string | undefined;
  /** A child RLM's iterations (rlm_query); undefined for a plain model call. */
  child: IterationView[] | undefined;
}

export interface ToolCallView {
  name: string;
  callId: string | undefined;
  success: boolean;
  result: unknown;
  error: string | undefined;
  durationMs: number | undefined;
}

interface CompactionView {
  /** The iteration after which the conversation was compacted. */
  afterIteration: number;
  tokensBefore: number | undefined;
  tokensAfter: number | undefined;
  summary: string;
}

interface RunEndView {
  status: string;
  answer: string | undefined;
  /** The answer was forced after the iteration limit; undefined when the log does not say. */
  forced: boolean | undefined;
  error: { name?: string; code?: string; message?: string } | undefined;
  partialAnswer: string | undefined;
  usage: unknown;
}

/** Reads a whole log's text. */
export function readRunLog(text: string): RunLog {
  const log: RunLog = { metadata: undefined, iterations: [], compactions: [], end: undefined, endsEarly: false, problems: [] };
  const lines = text.split('\n');
  lines.forEach((line, index) => {
    if (line.trim() === '') return;
    let entry: Record<string, unknown>;
    try {
      entry = JSON.parse(line) as Record<string, unknown>;
    } catch {
      if (index === lines.length - 1) log.endsEarly = true; // cut off while it was being written
      else log.problems.push(`line ${index + 1} is not JSON`);
      return;
    }
    readEntry(entry, index + 1, log);
  });
  if (!log.end) log.endsEarly = true;
  return log;
}

function readEntry(entry: Record<string, unknown>, lineNumber: number, log: RunLog): void {
  switch (entry.type) {
    case 'metadata':
      log.metadata = readMetadata(entry);
      return;
    case 'iteration':
      log.iterations.push(readIteration(entry, log.iterations.length + 1));
      return;
    case 'compaction':
      log.compactions.push({
        afterIteration: optionalNumber(entry.after_iteration) ?? log.iterations.length,
        tokensBefore: optionalNumber(entry.tokens_before),
        tokensAfter: optionalNumber(entry.tokens_after),
        summary: text(entry.summary),
      });
      return;
    case 'run_end':
      log.end = {
        status: text(entry.status) || 'unknown',
        answer: optionalText(entry.answer),
        forced: typeof entry.forced === 'boolean' ? entry.forced : undefined,
        error: object(entry.error) as RunEndView['error'],
        partialAnswer: optionalText(entry.partialAnswer),
        usage: entry.usage,
      };
      return;
    default:
      log.problems.push(`line ${lineNumber} has an unknown type ${JSON.stringify(entry.type)}`);
  }
}

function readMetadata(entry: Record<string, unknown>): LogMetadata {
  return {
    query: optionalText(entry.query),
    rootModel: optionalText(entry.root_model),
    otherModels: Array.isArray(entry.other_backends) ? entry.other_backends.map(String) : [],
    maxDepth: optionalNumber(entry.max_depth),
    maxIterations: optionalNumber(entry.max_iterations),
    environment: optionalText(entry.environment_type),
    timestamp: optionalText(entry.timestamp),
    outputSchema: object(entry.output_schema),
  };
}

function readIteration(entry: Record<string, unknown>, fallbackIndex: number): IterationView {
  return {
    index: optionalNumber(entry.iteration) ?? fallbackIndex,
    prompt: Array.isArray(entry.prompt) ? entry.prompt : [],
    response: text(entry.response),
    blocks: list(entry.code_blocks).map(readBlock),
    finalAnswer: optionalText(entry.final_answer) ?? null,
    rejectedFinal: entry.rejected_final === undefined ? undefined : readRejectedFinal(entry.rejected_final),
    durationMs: seconds(entry.iteration_time),
  };
}

function readBlock(value: unknown): BlockView {
  const block = object(value) ?? {};
  const result = object(block.result) ?? {};
  return {
    code: text(block.code),
    stdout: text(result.stdout),
    stderr: text(result.stderr),
    variables: Object.fromEntries(Object.entries(object(result.locals) ?? {}).map(([name, type]) => [name, String(type)])),
    durationMs: seconds(result.execution_time),
    finalAnswer: optionalText(result.final_answer) ?? null,
    rejectedFinals: list(result.rejected_finals).map(readRejectedFinal),
    subcalls: list(result.rlm_calls).map(readSubcall),
    toolCalls: list(result.tool_calls).map(readToolCall),
  };
}

function readRejectedFinal(value: unknown): RejectedFinalView {
  const rejected = object(value) ?? {};
  return { answer: text(rejected.answer), problems: list(rejected.problems).map(text) };
}

function readSubcall(value: unknown): SubcallView {
  const call = object(value) ?? {};
  const summaries = object(object(call.usage_summary)?.model_usage_summaries) ?? {};
  const usage = Object.fromEntries(
    Object.entries(summaries).map(([model, summary]) => {
      const counts = object(summary) ?? {};
      return [model, { calls: optionalNumber(counts.total_calls) ?? 0, inputTokens: optionalNumber(counts.total_input_tokens) ?? 0, outputTokens: optionalNumber(counts.total_output_tokens) ?? 0 }];
    }),
  );
  const metadata = object(call.metadata);
  return {
    model: optionalText(call.root_model),
    prompt: call.prompt,
    response: text(call.response),
    durationMs: seconds(call.execution_time),
    usage,
    error: optionalText(call.error),
    child: metadata?.kind === 'rlm' ? list(metadata.iterations).map((iteration, index) => readIteration(object(iteration) ?? {}, index + 1)) : undefined,
  };
}

function readToolCall(value: unknown): ToolCallView {
  const call = object(value) ?? {};
  return {
    name: text(call.name),
    callId: optionalText(call.call_id),
    success: call.success === true,
    result: call.result,
    error: optionalText(call.error),
    durationMs: seconds(call.execution_time),
  };
}

/** The logs keep durations in seconds, as the reference logger does. */
function seconds(value: unknown): number | undefined {
  const number = optionalNumber(value);
  return number === undefined ? undefined : number * 1000;
}
