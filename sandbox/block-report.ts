// The report of a block the worker sends to the host: output, error, final answer, a note on calls
// never awaited, and the model's variables, as JSON.
import { REPORT_LIMITS, clip } from '../src/sandbox/shared.js';
import { appendOutput, type AsyncCall, type BlockState } from './block-state.js';
import { describeThrown, shownValue, type ErrorReport } from './error-text.js';
import type { Globals } from './globals.js';
import { toJsonText } from './json.js';
import { ArrayPrototypeJoin, ArrayPrototypePush, ObjectGetOwnPropertyNames, newList, newRecord } from './primordials.js';

/** Kinds of unawaited calls a note names one by one; the rest are counted. */
const UNAWAITED_KINDS_SHOWN = 5;
const REPORT_JSON_LIMITS = { maxChars: 2 ** 53, maxDepth: 4 } as const;

/**
 * The block report. Describing the error, showing the trailing value and listing variables can
 * run model code (Proxy traps, getters), so the worker runs this under the block's time limit and
 * falls back to `outputReport` when it fails.
 */
export function collectReport(block: BlockState, { showResult, globals }: { showResult: boolean; globals: Globals }): string {
  const outcome = block.outcome;
  let error: ErrorReport | undefined;
  if (outcome.state === 'rejected') error = describeThrown(outcome.error, block.position);
  else if (outcome.state === 'pending') error = pendingError();
  else if (showResult && outcome.value !== undefined) appendOutput(block, `${shownValue(outcome.value, block.position)}\n`);
  // A pending block may still be awaiting its calls (it timed out); one that ended never will.
  const unawaited = outcome.state === 'pending' ? undefined : unawaitedCalls(block.asyncCalls);
  if (unawaited !== undefined && block.finalAnswer !== undefined) {
    block.finalAnswer = undefined;
    error ??= unawaitedFinalError();
  }
  const variables = globals.listVariables();
  const report = newRecord<unknown>();
  report.stdout = block.output;
  report.droppedChars = block.droppedChars;
  if (error) report.error = plainRecord(error);
  report.final = block.finalAnswer;
  if (unawaited !== undefined) report.note = unawaitedNote(unawaited);
  report.variables = variables.shown;
  report.omittedVariables = variables.total - variables.shown.length;
  return toJsonText(report, REPORT_JSON_LIMITS);
}

/** What the prelude holds as plain strings, for a block whose full report could not be made. */
export function outputReport(block: BlockState): string {
  const report = newRecord<unknown>();
  report.stdout = block.output;
  report.droppedChars = block.droppedChars;
  report.final = block.finalAnswer;
  report.variables = newList();
  report.omittedVariables = 0;
  return toJsonText(report, REPORT_JSON_LIMITS);
}

function pendingError(): ErrorReport {
  const message =
    'The block ended while still awaiting a promise that nothing can settle (there are no timers or ' +
    'background tasks in the sandbox). Await only llm_query/tool results or promises your code resolves.';
  return { name: 'PendingPromiseError', message, stack: '' };
}

/**
 * Asynchronous calls the block made but whose replies it never took, by how model code wrote
 * them ("2 calls to tools.search"); undefined when there are none. Their replies, if any come,
 * are dropped by the worker: the results are lost.
 */
export function unawaitedCalls(asyncCalls: Record<string, AsyncCall>): string | undefined {
  const ids = ObjectGetOwnPropertyNames(asyncCalls);
  if (ids.length === 0) return undefined;
  const counts = newRecord<number>();
  const order = newList<string>();
  for (let index = 0; index < ids.length; index++) {
    const shownAs = asyncCalls[ids[index]!]!.shownAs;
    if (counts[shownAs] === undefined) ArrayPrototypePush(order, shownAs);
    counts[shownAs] = (counts[shownAs] ?? 0) + 1;
  }
  const parts = newList<string>();
  const shown = order.length < UNAWAITED_KINDS_SHOWN ? order.length : UNAWAITED_KINDS_SHOWN;
  for (let index = 0; index < shown; index++) {
    const count = counts[order[index]!]!;
    ArrayPrototypePush(parts, `${count} call${count === 1 ? '' : 's'} to ${clip(order[index]!, REPORT_LIMITS.variableNameChars)}`);
  }
  if (order.length > shown) ArrayPrototypePush(parts, `calls to ${order.length - shown} more tools`);
  return ArrayPrototypeJoin(parts, ', ');
}

function unawaitedNote(calls: string): string {
  return (
    `Note: this block never awaited ${calls}: it ended without the results, which are lost. ` +
    'Await every call in the block that needs its result: const rows = await tools.NAME(args), or await Promise.all([...]) for several at once.'
  );
}

function unawaitedFinalError(): ErrorReport {
  const message =
    'FINAL was not accepted: this block ended with tool calls it never awaited, so their results were lost. ' +
    'Await them, then call FINAL with what they return.';
  return { name: 'UnawaitedCallError', message, stack: '' };
}

function plainRecord(error: ErrorReport): Record<string, unknown> {
  const record = newRecord<unknown>();
  record.name = error.name;
  record.message = error.message;
  record.stack = error.stack;
  return record;
}
