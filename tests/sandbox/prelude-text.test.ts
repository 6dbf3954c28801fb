// The prelude's pure parts, run directly in Node: no isolate, no worker. The same functions run
// inside the sandbox, where the red-team and pollution tests cover them end to end.
import { describe, expect, it } from 'vitest';
import { acceptedFinal } from '../../sandbox/answers.js';
import { unawaitedCalls } from '../../sandbox/block-report.js';
import { appendOutput, newBlockState, type AsyncCall, type BlockPosition } from '../../sandbox/block-state.js';
import { cleanStack, describeError, describeThrown, errorMessage, shownValue } from '../../sandbox/error-text.js';
import { variableNames, variablesText } from '../../sandbox/globals.js';
import { isolateErrorText, isTimeoutText } from '../../src/sandbox/isolate-errors.js';
import { REPORT_LIMITS, clip } from '../../src/sandbox/shared.js';

/** A block of 4 lines: the rewrite's wrapper closes on line 5; line 2 was shifted 20 columns right from column 10 on. */
const position: BlockPosition = { wrapperLine: 5, columnShifts: [[2, 10, 20]] };
const limits = { maxChars: 1_000_000, maxBatchItems: 100, maxDepth: 64 };

function errorWithStack(name: string, message: string, frames: string[]): Error {
  const error = new Error(message);
  error.name = name;
  error.stack = [`${name}: ${message}`, ...frames].join('\n');
  return error;
}

describe('stack cleaning', () => {
  it("keeps the block's frames and drops the prelude's, the wrapper's and the host's", () => {
    const stack = [
      'TypeError: x is not a function',
      '    at inner (block:1:15)',
      '    at FINAL (rlm-prelude:1:40213)',
      '    at outer (block:3:3)',
      '    at block:5:4',
      '    at node:internal/process:12:3',
    ].join('\n');
    expect(cleanStack(stack, 'TypeError: x is not a function', position)).toBe(
      'TypeError: x is not a function\n    at inner (block:1:15)\n    at outer (block:3:3)',
    );
  });

  it('maps columns of rewritten lines back to what the model wrote', () => {
    const stack = 'Error: e\n    at f (block:2:35)\n    at g (block:2:5)';
    // Column 35 lies after the edit (0-based 10): 20 columns left. Column 5 lies before it.
    expect(cleanStack(stack, 'Error: e', position)).toBe('Error: e\n    at f (block:2:15)\n    at g (block:2:5)');
  });

  it(`keeps at most ${REPORT_LIMITS.stackFrames} frames of at most ${REPORT_LIMITS.stackLineChars} characters`, () => {
    const longName = 'f'.repeat(2 * REPORT_LIMITS.stackLineChars);
    const frames = Array.from({ length: 50 }, (_, index) => `    at ${longName} (block:${index + 10}:1)`);
    const lines = cleanStack(['Error: deep', ...frames].join('\n'), 'Error: deep', position).split('\n');
    expect(lines).toHaveLength(1 + REPORT_LIMITS.stackFrames);
    expect(lines[1]).toBe(clip(frames[0]!, REPORT_LIMITS.stackLineChars));
    expect(lines[1]).toMatch(/\.\.\. \(\d+ more chars\)$/);
  });
});

describe('error text', () => {
  it('bounds the name and the message, and heads the stack with them', () => {
    const error = errorWithStack('N'.repeat(500), 'm'.repeat(10_000), ['    at f (block:1:1)']);
    const report = describeError(error, position);
    expect(report.name).toBe(clip('N'.repeat(500), REPORT_LIMITS.errorNameChars));
    expect(report.message).toBe(clip('m'.repeat(10_000), REPORT_LIMITS.errorMessageChars));
    expect(report.stack).toBe(`${report.name}: ${report.message}\n    at f (block:1:1)`);
  });

  it('reads name and message without running getters', () => {
    let ran = false;
    const error = new Error('kept');
    Object.defineProperty(error, 'name', {
      get() {
        ran = true;
        return 'Hijacked';
      },
    });
    error.stack = undefined;
    expect(describeError(error, position)).toEqual({ name: 'Error', message: 'kept', stack: 'Error: kept' });
    expect(ran).toBe(false);
  });

  it('shows a thrown non-error as Uncaught and its value', () => {
    expect(describeError({ code: 7 }, position)).toEqual({ name: 'Uncaught', message: '{ code: 7 }', stack: 'Uncaught { code: 7 }' });
    expect(errorMessage('x'.repeat(5_000))).toBe(clip('x'.repeat(5_000), REPORT_LIMITS.errorMessageChars));
  });

  it('describes a thrown value whose traps throw instead of failing', () => {
    const hostile = new Proxy(
      {},
      {
        getPrototypeOf() {
          throw new Error('trap');
        },
      },
    );
    expect(() => describeError(hostile, position)).toThrow('trap');
    expect(describeThrown(hostile, position).message).toBe('the block threw a value that cannot be described');
  });

  it('shows a trailing value: strings quoted, errors as their cleaned stack', () => {
    expect(shownValue(' ', position)).toBe('" "');
    expect(shownValue([1, 'a'], position)).toBe('[ 1, "a" ]');
    const error = errorWithStack('RangeError', 'too far', ['    at rlm-prelude:1:1', '    at f (block:1:2)']);
    expect(shownValue(error, position)).toBe('RangeError: too far\n    at f (block:1:2)');
  });
});

describe('clip', () => {
  it('says how much it cut', () => {
    expect(clip('abcdef', 6)).toBe('abcdef');
    expect(clip('abcdefgh', 3)).toBe('abc... (5 more chars)');
  });

  it('keeps working when String.prototype.slice is replaced after it loaded', () => {
    const original = String.prototype.slice;
    String.prototype.slice = () => 'hijacked';
    try {
      expect(clip('abcdefgh', 3)).toBe('abc... (5 more chars)');
    } finally {
      String.prototype.slice = original;
    }
  });
});

describe('block output and report text', () => {
  it('keeps output up to the block limit and counts what it drops', () => {
    const block = newBlockState(10, position);
    appendOutput(block, 'hello\n');
    appendOutput(block, 'world\n');
    appendOutput(block, 'again\n');
    expect(block.output).toBe('hello\nworl');
    expect(block.droppedChars).toBe(8);
  });

  it('names unawaited calls by how model code wrote them, five kinds at most', () => {
    const calls: Record<string, AsyncCall> = Object.create(null);
    const shownAs = ['tools.a', 'tools.a', 'tools.b', 'tools.c', 'tools.d', 'tools.e', 'tools.f', 'tools.g'];
    shownAs.forEach((name, id) => (calls[id] = { shownAs: name } as AsyncCall));
    expect(unawaitedCalls(Object.create(null))).toBeUndefined();
    expect(unawaitedCalls(calls)).toBe(
      '2 calls to tools.a, 1 call to tools.b, 1 call to tools.c, 1 call to tools.d, 1 call to tools.e, calls to 2 more tools',
    );
  });

  it('lists variables with how many more there are', () => {
    const variables = { shown: [{ name: 'a', type: 'number' }, { name: 'b', type: 'string (3 chars)' }], total: 5 };
    expect(variableNames(variables)).toBe('a, b and 3 more');
    expect(variablesText(variables)).toBe('Variables:\n  a: number\n  b: string (3 chars)\n  ... and 3 more\n');
    expect(variablesText({ shown: [], total: 0 })).toBe('No variables defined yet.\n');
  });
});

describe('final answers', () => {
  const answer = (value: unknown) => acceptedFinal({ value, caller: 'FINAL', awaited: 'FINAL(await x)', limits });

  it('refuses promises and undefined with what to do instead', () => {
    expect(() => answer(Promise.resolve(1))).toThrow('FINAL got a Promise, not its value: await it first: FINAL(await x).');
    expect(() => answer({ then: () => {} })).toThrow(TypeError);
    expect(() => answer('[object Promise]')).toThrow(/got a Promise/);
    expect(() => answer(undefined)).toThrow('FINAL got undefined, not an answer');
  });

  it('keeps text as is, writes objects as JSON, and prints what JSON cannot hold', () => {
    expect(answer('42')).toBe('42');
    expect(answer({ a: [1, 2] })).toBe('{"a":[1,2]}');
    const cycle: Record<string, unknown> = { name: 'loop' };
    cycle.self = cycle;
    expect(answer(cycle)).toBe('{ name: "loop", self: [Circular] }');
    expect(answer(7)).toBe('7');
  });
});

describe('isolated-vm errors', () => {
  it("drops isolated-vm's notes from the text and recognises its time-outs", () => {
    const error = new Error('Script execution timed out. [<isolated-vm>:12:3]');
    expect(isolateErrorText(error)).toBe('Error: Script execution timed out.');
    expect(isolateErrorText('plain')).toBe('plain');
    expect(isTimeoutText(isolateErrorText(error))).toBe(true);
    expect(isTimeoutText('RangeError: Array buffer allocation failed')).toBe(false);
  });
});
