// FINAL and FINAL_VAR: they mark the block's answer. A forgotten `await` (asynchronous tools return
// promises) or a variable its block never set must reach the model as an error it can fix, never
// the user as the answer "[object Promise]" or "undefined". The checks read descriptors only
// (isPromiseLike), and run in the block's time.
//
// When the run has an output schema (the block runs with checkFinal), the value must be JSON: its
// text goes to the worker process (`check_final`, answered there, never by the host), which checks
// it with the schema in the block's own time, and a value that does not match makes FINAL throw,
// listing the problems, so the model fixes it in the same block or the next turn. The isolate has
// no validator of its own.
import { REPORT_LIMITS, clip, type HostCallLimits } from '../src/sandbox/shared.js';
import { appendOutput, type BlockState } from './block-state.js';
import { errorMessage } from './error-text.js';
import { variableNames, type Globals } from './globals.js';
import type { HostCalls } from './host-calls.js';
import { inspect, isPromiseLike } from './inspect.js';
import { toJsonText } from './json.js';
import { JSONStringify, StringPrototypeTrim, TypeErrorCtor, globalObject, isError } from './primordials.js';

interface AnswersOptions {
  currentBlock: () => BlockState;
  globals: Globals;
  limits: HostCallLimits;
  hostCalls: HostCalls;
}

export function createAnswers({ currentBlock, globals, limits, hostCalls }: AnswersOptions) {
  /** Sets the block's answer; with checkFinal, only once the worker found it matches the output schema. */
  function settle(candidate: FinalCandidate) {
    const block = currentBlock();
    block.finalAnswer = block.checkFinal ? checkedFinal(candidate, hostCalls) : acceptedFinal(candidate);
  }

  function FINAL(...args: unknown[]) {
    if (args.length === 0) throw new TypeErrorCtor('FINAL(answer) needs the answer as its argument.');
    settle({ value: args[0], caller: 'FINAL', awaited: 'FINAL(await x)', limits });
  }

  function FINAL_VAR(...args: unknown[]) {
    if (args.length === 0) throw new TypeErrorCtor('FINAL_VAR(name) needs a variable name or a value.');
    const nameOrValue = args[0];
    if (typeof nameOrValue !== 'string') {
      settle({ value: nameOrValue, caller: 'FINAL_VAR', awaited: 'FINAL_VAR(await x)', limits });
      return;
    }
    const name = StringPrototypeTrim(nameOrValue);
    const refusal = globals.isDefined(name) ? undefined : missingVariableText(name, globals);
    const value = refusal === undefined ? (globalObject as Record<string, unknown>)[name] : undefined;
    if (refusal !== undefined || value === undefined) {
      appendOutput(currentBlock(), refusal ?? undefinedVariableText(name));
      return;
    }
    const shownName = JSONStringify(clip(name, REPORT_LIMITS.variableNameChars));
    const awaited = `FINAL(await ${clip(name, REPORT_LIMITS.variableNameChars)})`;
    settle({ value, caller: `FINAL_VAR(${shownName})`, awaited, limits });
  }

  return { FINAL, FINAL_VAR };
}

interface FinalCandidate {
  value: unknown;
  /** The call as the error names it: FINAL, FINAL_VAR("name"). */
  caller: string;
  /** The call the error suggests instead. */
  awaited: string;
  limits: HostCallLimits;
}

/** The answer as text; throws, saying what to do, for a promise or undefined. */
export function acceptedFinal(candidate: FinalCandidate): string {
  refuseNonAnswers(candidate);
  return answerText(candidate.value, candidate.limits);
}

/**
 * The answer as JSON text, once the worker has checked it against the output schema: a value that
 * cannot be written as JSON (a cycle, a function, a getter that throws, too large) or does not
 * match throws in the block.
 */
function checkedFinal(candidate: FinalCandidate, hostCalls: HostCalls): string {
  refuseNonAnswers(candidate);
  const { value, caller, limits } = candidate;
  let answer: string;
  try {
    answer = toJsonText(value, limits);
  } catch (error) {
    const reason = isError(error) ? errorMessage(error) : 'the value cannot be read';
    throw new TypeErrorCtor(`${caller}: the answer cannot be written as JSON (${reason}). Pass plain objects, arrays, strings, numbers and booleans.`);
  }
  // `kind` first: the worker recognizes the call by the head of its text, without parsing it all.
  hostCalls.call('check_final', { kind: 'check_final', answer }, caller);
  return answer;
}

function refuseNonAnswers({ value, caller, awaited }: FinalCandidate): void {
  if (isPromiseLike(value) || (typeof value === 'string' && StringPrototypeTrim(value) === '[object Promise]')) {
    throw new TypeErrorCtor(
      `${caller} got a Promise, not its value: await it first: ${awaited}. ` + 'Calls to asynchronous tools (tools.NAME) and async functions return promises.',
    );
  }
  if (value === undefined) {
    throw new TypeErrorCtor(`${caller} got undefined, not an answer: pass the answer itself (a function without return, or a variable never set, gives undefined).`);
  }
}

function answerText(value: unknown, limits: HostCallLimits): string {
  if (typeof value === 'string') return value;
  if (value !== null && typeof value === 'object') {
    try {
      return toJsonText(value, limits);
    } catch {
      // Cycles, functions and BigInts cannot be JSON: fall back to the printed form.
    }
  }
  return inspect(value);
}

function missingVariableText(name: string, globals: Globals): string {
  const known = globals.listVariables();
  return (
    `FINAL_VAR error: no variable named ${JSONStringify(clip(name, REPORT_LIMITS.variableNameChars))}. ` +
    (known.total > 0 ? `Defined variables: ${variableNames(known)}. ` : 'No variables are defined yet. ') +
    'Assign the answer to a variable first, or call FINAL(value). The run continues.\n'
  );
}

function undefinedVariableText(name: string): string {
  return (
    `FINAL_VAR error: the variable ${JSONStringify(clip(name, REPORT_LIMITS.variableNameChars))} is undefined, so it holds no answer ` +
    '(was the block that sets it stopped by an error?). Assign the answer to it first, or call FINAL(value). The run continues.\n'
  );
}
