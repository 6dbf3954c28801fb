// Everything one block changes in the prelude, in one object. beginBlock replaces it whole, so no
// output, answer, outcome, scaffold override or unanswered call of one block reaches the next.
import { StringPrototypeSlice, newList, newRecord } from './primordials.js';

/** `[row, column, shift]`: from `column` of `row` on, the rewritten block is `shift` columns right of what the model wrote. */
export type ColumnShift = [number, number, number];

/** Where the block's own code sits in the script the worker runs, to map stack lines back to it. */
export interface BlockPosition {
  /** The line of the wrapper the rewrite adds around the block: its frames are not the model's. */
  wrapperLine: number;
  columnShifts: ColumnShift[];
}

type BlockOutcome = { state: 'pending' } | { state: 'fulfilled'; value: unknown } | { state: 'rejected'; error: unknown };

/** A call sent by callHostAsync whose reply has not come yet. */
export interface AsyncCall {
  resolve: (value: unknown) => void;
  reject: (reason: unknown) => void;
  /** Turns the reply's value into what the promise resolves to (tool_handler: the result text). */
  present: (value: unknown) => unknown;
  /** The call as model code wrote it (`tools.search`, `tool_handler("search")`), for the unawaited-calls note. */
  shownAs: string;
}

export interface BlockState {
  readonly position: BlockPosition;
  /** Characters of printed output the block may keep; the rest is counted in droppedChars. */
  readonly outputLimit: number;
  output: string;
  droppedChars: number;
  finalAnswer: string | undefined;
  /** FINAL values are checked against the output schema (`check_final`) before they are taken. */
  readonly checkFinal: boolean;
  outcome: BlockOutcome;
  /** Values model code assigned to scaffold names: they last for the rest of this block only. */
  readonly overrides: Record<string, unknown>;
  /** Calls sent by callHostAsync, by id, until the worker delivers their replies. */
  readonly asyncCalls: Record<string, AsyncCall>;
}

export function newBlockState(outputLimit: number, position: BlockPosition, checkFinal = false): BlockState {
  return {
    position,
    outputLimit,
    output: '',
    droppedChars: 0,
    finalAnswer: undefined,
    checkFinal,
    outcome: { state: 'pending' },
    overrides: newRecord(),
    asyncCalls: newRecord(),
  };
}

/** The state before any block has run: no output is kept, no stack line is the block's. */
export function idleBlockState(): BlockState {
  return newBlockState(0, { wrapperLine: 0, columnShifts: newList() });
}

/** Adds printed text to the block's output, keeping at most its limit and counting what is dropped. */
export function appendOutput(block: BlockState, text: string): void {
  const room = block.outputLimit - block.output.length;
  if (room <= 0) {
    block.droppedChars += text.length;
    return;
  }
  const kept = text.length <= room ? text : StringPrototypeSlice(text, 0, room);
  block.output += kept;
  block.droppedChars += text.length - kept.length;
}
