// Where a turn's final answer comes from, for a normal turn and for the forced last one: the FINAL of
// its last block, else the FINAL(...) / FINAL_VAR(...) written in its text, under the rules below.
import type { Sandbox } from '../sandbox/sandbox.js';
import type { CodeBlockRecord } from './events.js';
import type { BlockScope } from './host-calls.js';
import { RunLimitError } from './limits.js';
import type { ParsedReply, TextFinal } from './parsing.js';
import { message } from './prompts.js';

interface AnsweredTurn {
  parsed: ParsedReply;
  /** The records of the blocks the reply ran. */
  codeBlocks: CodeBlockRecord[];
  /** Where FINAL_VAR(name) is looked up. */
  sandbox: Promise<Sandbox<BlockScope>>;
  signal: AbortSignal;
}

/** A turn's answer, or the notes that tell the model why its text answer was not taken. */
type TurnAnswer = { answer: string; source: 'code' | 'text' } | { answer?: undefined; notes: string[] };

export class FinalAnswerResolver {
  readonly #maxIterations: number;
  /** A FINAL before any code was refused once; the model that gives one again means it. */
  #codelessFinalRefused = false;

  constructor(options: { maxIterations: number }) {
    this.#maxIterations = options.maxIterations;
  }

  /**
   * A normal turn. FINAL(...) written as text ends the run only when the reply has no code (the
   * model has not seen that code's output yet) and some code has already run in this run (the model
   * has looked); before any code, only when the model gives it a second time.
   */
  async ofTurn(turn: AnsweredTurn & { codeHasRun: boolean }): Promise<TurnAnswer> {
    const codeFinal = turn.codeBlocks.at(-1)?.result.final;
    if (codeFinal !== undefined) return { answer: codeFinal, source: 'code' };
    const final = turn.parsed.textFinal;
    if (!final) return { notes: [] };
    if (turn.parsed.blocks.length > 0) return { notes: [message('final-with-code')] };
    if (!turn.codeHasRun && !this.#codelessFinalRefused) {
      // Models that answer before looking are usually guessing; one that says it again is sure.
      this.#codelessFinalRefused = true;
      return { notes: [message('final-before-code')] };
    }
    const found = await textAnswer(final, turn);
    return 'answer' in found ? { answer: found.answer, source: 'text' } : { notes: [found.refusal] };
  }

  /**
   * The forced last turn: its last block's FINAL, else its text FINAL(...) or FINAL_VAR(...), else its
   * prose; undefined when it offered only code. A refused FINAL_VAR ends the run at its limit, saying
   * why, since the model can no longer fix it.
   */
  async ofForcedTurn(turn: AnsweredTurn): Promise<string | undefined> {
    const codeFinal = turn.codeBlocks.at(-1)?.result.final;
    if (codeFinal !== undefined) return codeFinal;
    const final = turn.parsed.textFinal;
    if (!final) return turn.parsed.prose || undefined;
    const found = await textAnswer(final, turn);
    if ('answer' in found) return found.answer;
    // Its first sentence says why; the rest tells the model how to go on, which it no longer can.
    const reason = /^[\s\S]*?[.?!](?=\s|$)/.exec(found.refusal)?.[0] ?? found.refusal;
    throw new RunLimitError('max_iterations', `The run used all ${this.#maxIterations} iterations, and the answer of its last reply was refused: ${reason}`);
  }
}

/**
 * The answer a text FINAL gives: its text, or the value of the variable FINAL_VAR names, looked up
 * in the sandbox. A variable that holds none (missing, undefined, a promise) is refused, saying why.
 */
async function textAnswer(final: TextFinal, { sandbox, signal }: AnsweredTurn): Promise<{ answer: string } | { refusal: string }> {
  if (final.kind === 'FINAL') return { answer: final.value };
  const lookup = await (await sandbox).execute(`FINAL_VAR(${JSON.stringify(final.name)})`, { signal });
  if (lookup.final !== undefined) return { answer: lookup.final };
  return { refusal: lookup.stdout.trim() || lookup.error?.message || message('final-var-missing', { name: final.name }) };
}
