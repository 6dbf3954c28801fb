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

/** The error `action` throws, checked to be a `type`; the test fails when it returns. */
export function thrownBy<T>(action: () => unknown, type: abstract new (...args: never[]) => T): T {
  let error: unknown;
  try {
    action();
  } catch (caught) {
    error = caught;
  }
  expect(error).toBeInstanceOf(type);
  return error as T;
}
