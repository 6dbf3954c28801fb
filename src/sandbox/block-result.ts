import { SandboxError } from '../errors.js';
import { formatDuration, formatCount } from '../format.js';
import { blockReportSchema, parseJsonText, type BlockReport, type WorkerEvent } from './protocol.js';
import type { SandboxLimits } from './sandbox-limits.js';
import { MAX_REJECTED_FINALS, REJECTED_ANSWER_CHARS, type RejectedFinal } from './schema-problems.js';
import { clip, REPORT_LIMITS } from './shared.js';

export interface BlockError {
  name: string;
  message: string;
  /** Name, message and the frames in model code (`at f (block:3:7)`); never host frames or paths. */
  stack: string;
}

export interface Variable {
  name: string;
  type: string;
}

export interface ExecuteResult {
  /** Everything printed, in order, cut at the output limit with a marker saying how much was dropped. */
  stdout: string;
  error?: BlockError;
  /** Set when the block called FINAL or FINAL_VAR: the serialized answer. */
  final?: string;
  durationMs: number;
  /** The model's variables after the block, with short type descriptions (at most 100, sorted by name). */
  variables: Variable[];
  /** How many more variables exist than `variables` lists. */
  omittedVariables?: number;
  /** The block crashed the sandbox: it was replaced by a fresh one and every variable was lost. */
  reset: boolean;
  /** FINAL values the output schema refused (the first few; only in blocks run with `checkFinal`). */
  rejectedFinals?: RejectedFinal[];
}

/** Why a block cost the sandbox its worker. */
export type ResetReason = 'memory' | 'memory-full' | 'crashed' | 'crashed-between-blocks' | 'unresponsive' | 'resident-memory' | 'report-timeout' | 'report-failed';

/** The worker's reply to a block it ran to some end. */
type ExecutedReply = Extract<WorkerEvent, { type: 'executed' }>;

interface BlockResultOptions {
  durationMs: number;
  limits: Pick<SandboxLimits, 'memoryLimitMb' | 'blockTimeoutMs' | 'outputLimitChars'>;
}

/**
 * Turns the worker's reply to a block into the result model code's author sees. The report inside
 * comes out of the isolate: it is checked against `blockReportSchema` and bounded again. A result
 * with `reset` set means the worker must be replaced. Throws a SandboxError if the report is
 * malformed; the worker that sent it cannot be trusted either.
 */
export function blockResult(reply: ExecutedReply, options: BlockResultOptions): ExecuteResult {
  const result = resultOfOutcome(reply, options);
  const rejected = reply.rejectedFinals?.slice(0, MAX_REJECTED_FINALS).map(({ answer, problems }) => ({ answer: clip(answer, REJECTED_ANSWER_CHARS), problems }));
  return rejected?.length ? { ...result, rejectedFinals: rejected } : result;
}

function resultOfOutcome(reply: ExecutedReply, options: BlockResultOptions): ExecuteResult {
  if (reply.outcome === 'memory') return resetResult('memory', options);
  if (reply.outcome === 'memory-full') {
    // The block's own output, then a reset blamed on it: it left the heap too full for the next block.
    const { stdout } = completedResult(reply, options);
    return { ...resetResult('memory-full', { ...options, detail: reply.failure }), stdout };
  }
  if (reply.outcome === 'report-timeout' || reply.outcome === 'report-failed') {
    // What the block left behind (a global getter or Proxy trap that never returns) made its report
    // fail, and would make every later block's report fail the same way.
    const { stdout, final } = completedResult(reply, options);
    return { ...resetResult(reply.outcome, { ...options, detail: reply.failure }), stdout, ...(final !== undefined && { final }) };
  }
  return completedResult(reply, options);
}

/** The result of a block that cost the sandbox its worker: every variable is lost. */
export function resetResult(reason: ResetReason, options: BlockResultOptions & { detail?: string | undefined }): ExecuteResult {
  const { limits, durationMs, detail = '' } = options;
  const lost = 'The sandbox was reset: every variable was lost (context is still loaded). Rebuild the state you need in smaller steps.';
  const messages: Record<ResetReason, [string, string]> = {
    memory: ['MemoryLimitError', `The block used more than the sandbox memory limit (${limits.memoryLimitMb} MB). ${lost}`],
    'memory-full': [
      'MemoryLimitError',
      `The block left the sandbox's memory nearly full (${detail} still in use after it ended), so the next block would fail. Keep less in variables. ${lost}`,
    ],
    'resident-memory': ['MemoryLimitError', `The sandbox process grew far past its memory limit (${limits.memoryLimitMb} MB heap). ${lost}`],
    crashed: ['SandboxCrashedError', `The sandbox process stopped while running the block (${detail || 'usually memory exhaustion'}). ${lost}`],
    'crashed-between-blocks': ['SandboxCrashedError', `The sandbox process stopped between blocks (${detail}), so this block did not run. ${lost}`],
    unresponsive: ['TimeoutError', `The block ran past the ${formatDuration(limits.blockTimeoutMs)} time limit and could not be interrupted. ${lost}`],
    'report-timeout': [
      'TimeoutError',
      `The block ran past the ${formatDuration(limits.blockTimeoutMs)} time limit while its variables were listed: ` +
        `a getter or Proxy it left in a global variable (or in its error or value) does not return. ${lost}`,
    ],
    'report-failed': ['SandboxError', `The block's variables could not be listed (${detail}). ${lost}`],
  };
  const [name, message] = messages[reason];
  return { stdout: '', error: { name, message, stack: `${name}: ${message}` }, durationMs, variables: [], reset: true };
}

/** The block's report, checked and bounded, with the error the worker saw. */
function completedResult(reply: ExecutedReply, { durationMs, limits }: BlockResultOptions): ExecuteResult {
  const parsed = blockReportSchema.safeParse(parseJsonText(reply.result));
  if (!parsed.success) throw new SandboxError('sandbox_protocol_error', 'The sandbox returned a malformed block report; it was reset.');
  const report = boundReport(parsed.data, limits.outputLimitChars);
  const stdout = report.droppedChars > 0 ? `${report.stdout}${truncationMarker(report.droppedChars)}` : report.stdout;
  const error = outcomeError(reply, report, limits.blockTimeoutMs);
  return {
    stdout: report.note === undefined ? stdout : `${stdout}${stdout === '' || stdout.endsWith('\n') ? '' : '\n'}${report.note}\n`,
    ...(error && { error }),
    ...(report.final !== undefined && { final: report.final }),
    durationMs,
    variables: report.variables,
    ...(report.omittedVariables > 0 && { omittedVariables: report.omittedVariables }),
    reset: false,
  };
}

/** The block's error: the one the worker saw (time limit, compile error), else the report's own. */
function outcomeError(reply: ExecutedReply, report: BlockReport, blockTimeoutMs: number): BlockError | undefined {
  if (reply.outcome === 'timeout') return timeoutError(blockTimeoutMs);
  if (reply.outcome === 'compile-error') return splitFailure(reply.failure ?? 'SyntaxError: the block does not compile');
  if (reply.outcome === 'unhandled-rejection' && !report.error) {
    return splitFailure(`${reply.failure ?? 'Error'} (a promise was rejected and nothing handled it)`);
  }
  return report.error;
}

function timeoutError(blockTimeoutMs: number): BlockError {
  const message =
    `The block ran for more than ${formatDuration(blockTimeoutMs)} of execution time and was stopped ` +
    '(time spent waiting for llm_query and tools does not count). Variables set before the stop are kept. ' +
    'Split the work into smaller blocks.';
  return { name: 'TimeoutError', message, stack: `TimeoutError: ${message}` };
}

/**
 * The report comes out of the isolate, so it is treated as untrusted even though the prelude
 * bounds it already: nothing in it may grow the root model's next prompt past these limits.
 */
function boundReport(report: BlockReport, outputLimitChars: number): BlockReport {
  const stdout = report.stdout.length > outputLimitChars ? report.stdout.slice(0, outputLimitChars) : report.stdout;
  const error = report.error && {
    name: clip(report.error.name, REPORT_LIMITS.errorNameChars),
    message: clip(report.error.message, REPORT_LIMITS.errorMessageChars),
    stack: clip(report.error.stack, REPORT_LIMITS.errorMessageChars + REPORT_LIMITS.stackFrames * REPORT_LIMITS.stackLineChars),
  };
  const variables = report.variables.slice(0, REPORT_LIMITS.variables).map((variable) => ({
    name: clip(variable.name, REPORT_LIMITS.variableNameChars),
    type: clip(variable.type, REPORT_LIMITS.variableTypeChars),
  }));
  return {
    ...report,
    stdout,
    droppedChars: report.droppedChars + (report.stdout.length - stdout.length),
    ...(error && { error }),
    ...(report.note !== undefined && { note: clip(report.note, REPORT_LIMITS.errorMessageChars) }),
    variables,
    omittedVariables: report.omittedVariables + (report.variables.length - variables.length),
  };
}

function splitFailure(failure: string): BlockError {
  const match = /^([A-Za-z]*Error): ([\s\S]*)$/.exec(failure);
  const name = clip(match?.[1] ?? 'Error', REPORT_LIMITS.errorNameChars);
  const message = clip(match?.[2] ?? failure, REPORT_LIMITS.errorMessageChars);
  return { name, message, stack: `${name}: ${message}` };
}

function truncationMarker(droppedChars: number): string {
  return `\n... [output truncated: ${formatCount(droppedChars)} more characters not shown. Print less: slices, counts or summaries.]`;
}
