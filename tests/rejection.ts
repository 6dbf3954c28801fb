import { expect } from 'vitest';

/** The error `promise` rejects with, checked to be a `type`; the test fails when it resolves. */
export async function rejectionOf<T>(promise: Promise<unknown>, type: abstract new (...args: never[]) => T): Promise<T> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(type);
  return error as T;
}
