// Reading the errors isolated-vm throws, in the worker (a block's failure) and on the host (a
// failed load reported by the worker), in one place.

/** The notes isolated-vm appends to messages (`[<isolated-vm>:3:7]`): they name no place in the block. */
const ISOLATE_NOTES = /\s*\[<isolated-vm>[^\]]*\]/g;

/** "Name: message" of what an isolated-vm call threw, without isolated-vm's own notes. */
export function isolateErrorText(error: unknown): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return text.replace(ISOLATE_NOTES, '');
}

/** Whether an isolated-vm failure (its text or message) is the operation's time limit running out. */
export function isTimeoutText(text: string): boolean {
  return /timed out/i.test(text);
}
