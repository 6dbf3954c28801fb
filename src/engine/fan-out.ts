import { describeError } from '../errors.js';

/**
 * What a single call or a batch answers. A single call fails with its error; a batch never fails
 * as a whole: it keeps input order, and a failed item becomes a string starting with "Error:" that
 * says what went wrong, so the others are still usable.
 */
export async function settleCalls<T>(kind: 'single' | 'batch', calls: Promise<T>[]): Promise<T | (T | string)[]> {
  if (kind === 'single') return calls[0]!;
  return (await Promise.allSettled(calls)).map(itemResult);
}

/** One item of a batch: its answer, or a string starting with "Error:" that says what failed. */
export function itemResult<T>(outcome: PromiseSettledResult<T>): T | string {
  if (outcome.status === 'fulfilled') return outcome.value;
  const { name, message } = describeError(outcome.reason);
  return name !== 'Error' ? `Error: ${name}: ${message}` : `Error: ${message}`;
}
