// How an answer that does not match the output schema is reported: each problem as `path: message`,
// the first few only. One formatter for both places that check answers: the sandbox worker (FINAL in
// a block) and the host (the answer that ends a turn), so the model reads the same words from both.
import { formatCount } from '../format.js';
import type { z } from 'zod';
import { clip } from './shared.js';

/** A final answer refused because it does not match the output schema, and why. */
export interface RejectedFinal {
  /** The answer as given (its JSON text for a value), cut to REJECTED_ANSWER_CHARS. */
  answer: string;
  /** Each problem as `path: message`. */
  problems: string[];
}

/** How much of a refused answer its record keeps. */
export const REJECTED_ANSWER_CHARS = 4_000;
/** How many refused FINAL values a block's result keeps: the first few say what went wrong. */
export const MAX_REJECTED_FINALS = 10;

// A value wrong in a million places is reported by its first few problems: enough to fix the code.
const LISTED_PROBLEMS = 10;
const PROBLEM_CHARS = 300;

/** Each problem as `path: message` (`parties.2.signed: expected string, received null`), at most LISTED_PROBLEMS of them, then "and N more". */
export function problemsOf(issues: readonly z.core.$ZodIssue[]): string[] {
  const listed = issues.slice(0, LISTED_PROBLEMS).map((issue) => clip(`${issue.path.map(String).join('.') || '(the answer)'}: ${issueText(issue.message)}`, PROBLEM_CHARS));
  const more = issues.length - listed.length;
  if (more > 0) listed.push(`and ${formatCount(more)} more`);
  return listed;
}

/** The problems as the model reads them: one `- ` line each. */
export function problemsText(problems: string[]): string {
  return problems.map((problem) => `- ${problem}`).join('\n');
}

function issueText(message: string): string {
  const text = message.replace(/^Invalid input: /, '');
  const missing = /^expected (.+), received undefined$/.exec(text);
  return missing ? `missing (expected ${missing[1]})` : text;
}
