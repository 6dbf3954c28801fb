// How errors and values read in what the model sees: the error of a block, an error printed with
// print(), a block's trailing value. Pure functions of their arguments: nothing here keeps state,
// and all of it is bounded by REPORT_LIMITS.
import { BLOCK_FILENAME, REPORT_LIMITS, clip } from '../src/sandbox/shared.js';
import type { BlockPosition, ColumnShift } from './block-state.js';
import { inspect, readOwnString } from './inspect.js';
import {
  ArrayPrototypeJoin,
  ArrayPrototypePush,
  JSONStringify,
  MathMax,
  NumberParseInt,
  StringPrototypeCharCodeAt,
  StringPrototypeIncludes,
  StringPrototypeIndexOf,
  StringPrototypeSlice,
  StringPrototypeStartsWith,
  StringPrototypeTrim,
  isError,
  newList,
  splitLines,
} from './primordials.js';

export type ErrorReport = { name: string; message: string; stack: string };

const BLOCK_MARKER = `${BLOCK_FILENAME}:`;
const COLON = 58;

/** The message of anything thrown: an Error's own (or inherited data) message, else the value as printed. */
export function errorMessage(error: unknown): string {
  const message = isError(error) ? (readOwnString(error, 'message') ?? '') : inspect(error);
  return clip(message, REPORT_LIMITS.errorMessageChars);
}

/** Name, message and a stack of the block's own frames, each bounded by REPORT_LIMITS. Runs no getters. */
export function describeError(error: unknown, position: BlockPosition): ErrorReport {
  if (!isError(error)) {
    const shown = errorMessage(error);
    return { name: 'Uncaught', message: shown, stack: `Uncaught ${shown}` };
  }
  const name = clip(readOwnString(error, 'name') ?? 'Error', REPORT_LIMITS.errorNameChars);
  const message = errorMessage(error);
  const rawStack = readOwnString(error, 'stack');
  const header = message ? `${name}: ${message}` : name;
  return { name, message, stack: rawStack ? cleanStack(rawStack, header, position) : header };
}

/** describeError for what a block threw, which never fails: a thrown Proxy's traps may throw in turn. */
export function describeThrown(error: unknown, position: BlockPosition): ErrorReport {
  try {
    return describeError(error, position);
  } catch {
    return { name: 'Uncaught', message: 'the block threw a value that cannot be described', stack: 'Uncaught (a value that cannot be described)' };
  }
}

/** A value as print() shows it: errors as their cleaned stack, everything else inspected. */
export function printedText(value: unknown, position: BlockPosition): string {
  return isError(value) ? describeError(value, position).stack : inspect(value);
}

/** A block's trailing value as shown after its output: strings quoted, so "" and " " can be told apart. */
export function shownValue(value: unknown, position: BlockPosition): string {
  try {
    return typeof value === 'string' ? JSONStringify(value) : printedText(value, position);
  } catch {
    return '[a value that cannot be shown]';
  }
}

/**
 * Only frames in model code are useful (and safe) to show: keeps the header and at most
 * REPORT_LIMITS.stackFrames lines in the block, without the rewrite's wrapper, with columns mapped
 * back to what the model wrote.
 */
export function cleanStack(stack: string, header: string, position: BlockPosition): string {
  const wrapperFrame = `${BLOCK_MARKER}${position.wrapperLine}:`;
  const kept = newList<string>();
  ArrayPrototypePush(kept, header);
  const lines = splitLines(stack);
  for (let index = 0; index < lines.length && kept.length <= REPORT_LIMITS.stackFrames; index++) {
    const line = lines[index]!;
    if (!StringPrototypeStartsWith(StringPrototypeTrim(line), 'at ') || !StringPrototypeIncludes(line, BLOCK_MARKER)) continue;
    if (StringPrototypeIncludes(line, wrapperFrame)) continue;
    ArrayPrototypePush(kept, clip(mapBlockPosition(line, position.columnShifts), REPORT_LIMITS.stackLineChars));
  }
  return ArrayPrototypeJoin(kept, '\n');
}

/** Rewrites `block:ROW:COLUMN` in a stack line to the column the model wrote. */
function mapBlockPosition(line: string, columnShifts: ColumnShift[]): string {
  const at = StringPrototypeIndexOf(line, BLOCK_MARKER);
  const row = readDigits(line, at + BLOCK_MARKER.length);
  if (at === -1 || row.end === at + BLOCK_MARKER.length || StringPrototypeCharCodeAt(line, row.end) !== COLON) return line;
  const column = readDigits(line, row.end + 1);
  if (column.end === row.end + 1) return line;
  const mapped = originalColumn(row.value, column.value, columnShifts);
  return `${StringPrototypeSlice(line, 0, at)}${BLOCK_MARKER}${row.value}:${mapped}${StringPrototypeSlice(line, column.end)}`;
}

function readDigits(text: string, start: number): { value: number; end: number } {
  let end = start;
  for (let code = StringPrototypeCharCodeAt(text, end); code >= 48 && code <= 57; code = StringPrototypeCharCodeAt(text, end)) end++;
  return { value: end > start ? NumberParseInt(StringPrototypeSlice(text, start, end), 10) : 0, end };
}

// Maps a 1-based column of the rewritten block back to the column the model wrote.
function originalColumn(row: number, column: number, columnShifts: ColumnShift[]): number {
  let shift = 0;
  let editEnd = 0;
  for (let index = 0; index < columnShifts.length; index++) {
    const edit = columnShifts[index]!;
    if (edit[0] === row && edit[1] <= column - 1) {
      shift = edit[2];
      editEnd = edit[1];
    }
  }
  return MathMax(column - shift, editEnd - shift + 1, 1);
}
