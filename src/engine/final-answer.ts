// Where a turn's final answer comes from, for a normal turn and for the forced last one: the FINAL of
// its last block, else the FINAL(...) / FINAL_VAR(...) written in its text, under the rules below.
import type { Sandbox } from '../sandbox/sandbox.js';
import { clip } from '../sandbox/shared.js';
import { problemsText, REJECTED_ANSWER_CHARS, type RejectedFinal } from '../sandbox/schema-problems.js';
import type { CodeBlockRecord } from './events.js';
import type { BlockScope } from './host-calls.js';
import { RunLimitError } from './limits.js';
import type { OutputSchema } from './output-schema.js';
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

/** An answer taken: its text and, with an output schema, its value (the text is then its JSON). */
interface TakenAnswer {
  answer: string;
  output?: unknown;
}

/** A turn's answer, or the notes that tell the model why its text answer was not taken. */
type TurnAnswer = (TakenAnswer & { source: 'code' | 'text' }) | { answer?: undefined; notes: string[]; rejected?: RejectedFinal };

/** The forced turn's answer; `rejected` when it does not match the output schema, undefined when it offered only code. */
type ForcedAnswer = TakenAnswer | { answer?: undefined; rejected: RejectedFinal } | undefined;

export class FinalAnswerResolver {
  readonly #maxIterations: number;
  readonly #output: OutputSchema | undefined;
  /** A FINAL before any code was refused once; the model that gives one again means it. */
  #codelessFinalRefused = false;

  constructor(options: { maxIterations: number; output?: OutputSchema | undefined }) {
    this.#maxIterations = options.maxIterations;
    this.#output = options.output;
  }

  /**
   * A normal turn. FINAL(...) written as text ends the run only when the reply has no code (the
   * model has not seen that code's output yet) and some code has already run in this run (the model
   * has looked); before any code, only when the model gives it a second time. With an output
   * schema, an answer that does not match it is refused with a note listing the problems.
   */
  async ofTurn(turn: AnsweredTurn & { codeHasRun: boolean }): Promise<TurnAnswer> {
    const codeFinal = turn.codeBlocks.at(-1)?.result.final;
    if (codeFinal !== undefined) return this.#turnAnswer(this.#checked(codeFinal, { fromCode: true }), 'code');
    const final = turn.parsed.textFinal;
    if (!final) return { notes: [] };
    if (turn.parsed.blocks.length > 0) return { notes: [message('final-with-code')] };
    if (!turn.codeHasRun && !this.#codelessFinalRefused) {
      // Models that answer before looking are usually guessing; one that says it again is sure.
      this.#codelessFinalRefused = true;
      return { notes: [message('final-before-code')] };
    }
    const found = await textAnswer(final, turn);
    return 'answer' in found ? this.#turnAnswer(this.#checked(found.answer, {}), 'text') : { notes: [found.refusal] };
  }

  /**
   * The forced last turn: its last block's FINAL, else its text FINAL(...) or FINAL_VAR(...), else its
   * prose (with an output schema: the reply as JSON); undefined when it offered only code. A refused
   * FINAL_VAR ends the run at its limit, saying why, since the model can no longer fix it.
   */
  async ofForcedTurn(turn: AnsweredTurn & { reply: string }): Promise<ForcedAnswer> {
    const codeFinal = turn.codeBlocks.at(-1)?.result.final;
    if (codeFinal !== undefined) return this.#checked(codeFinal, { fromCode: true });
    const final = turn.parsed.textFinal;
    if (!final) {
      const text = this.#output ? unfenced(turn.reply) : turn.parsed.prose;
      return text ? this.#checked(text, { nullsAsAbsent: true }) : undefined;
    }
    const found = await textAnswer(final, turn);
    if ('answer' in found) return this.#checked(found.answer, { nullsAsAbsent: true });
    // Its first sentence says why; the rest tells the model how to go on, which it no longer can.
    const reason = /^[\s\S]*?[.?!](?=\s|$)/.exec(found.refusal)?.[0] ?? found.refusal;
    throw new RunLimitError('max_iterations', `The run used all ${this.#maxIterations} iterations, and the answer of its last reply was refused: ${reason}`);
  }

  #turnAnswer(checked: TakenAnswer | { rejected: RejectedFinal }, source: 'code' | 'text'): TurnAnswer {
    if ('answer' in checked) return { ...checked, source };
    return { notes: [message('final-invalid-text', { problems: problemsText(checked.rejected.problems) })], rejected: checked.rejected };
  }

  /**
   * An answer checked against the output schema, if any. A block's FINAL is the JSON text of its
   * value (see Sandbox.execute's checkFinal); a text answer is read by OutputSchema.check.
   */
  #checked(answer: string, options: { fromCode?: boolean; nullsAsAbsent?: boolean }): TakenAnswer | { rejected: RejectedFinal } {
    if (!this.#output) return { answer };
    const checked = this.#output.check(options.fromCode ? jsonValue(answer) : answer, options);
    if ('value' in checked) return { answer: checked.json, output: checked.value };
    return { rejected: { answer: clip(answer, REJECTED_ANSWER_CHARS), problems: checked.problems } };
  }
}

/** The JSON text's value; text that is not JSON stays text (OutputSchema.check then reads it). */
function jsonValue(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** A reply that is one fenced block (```json ... ```) means what is inside it. */
function unfenced(reply: string): string {
  const fenced = /^\s*```[\w-]*[ \t]*\n([\s\S]*?)\n?[ \t]*```\s*$/.exec(reply);
  return (fenced ? fenced[1]! : reply).trim();
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
