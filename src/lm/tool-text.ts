// How tool results are written for the model. Shared by the host and the sandbox prelude (which
// bundles this file), so both report results and failures the same way. Written without global
// lookups such as `instanceof Error`, which model code inside the sandbox could replace.

export function toolOutputText(value: unknown): string {
  if (typeof value === 'string') return value;
  return value === undefined ? '' : JSON.stringify(value);
}

export function toolErrorText(name: string, error: unknown): string {
  const message =
    error !== null && typeof error === 'object' && typeof (error as { message?: unknown }).message === 'string'
      ? (error as { message: string }).message
      : String(error);
  return `Error executing ${name}: ${message}`;
}
