// How tool results are written for the model. The host and the sandbox prelude (which bundles this
// file) both use it, so results and failures read the same wherever the tool ran. It looks up no
// globals: inside the sandbox, model code could have replaced them.

export function toolOutputText(value: unknown, stringify: (value: unknown) => string): string {
  if (typeof value === 'string') return value;
  return value === undefined ? '' : stringify(value);
}

/** `message` is the failure's text, already read from the error by the caller. */
export function toolErrorText(name: string, message: string): string {
  return `Error executing ${name}: ${message}`;
}
