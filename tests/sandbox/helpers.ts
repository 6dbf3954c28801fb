import { afterEach, beforeEach } from 'vitest';
import { Sandbox, type Isolation, type SandboxOptions } from '../../src/index.js';

const open: Sandbox[] = [];

/** Both ways sandboxes are separated: suites where it matters run once in each (see inIsolation). */
export const ISOLATIONS: Isolation[] = ['isolate', 'process'];

let isolation: Isolation = 'isolate';

/** Makes createSandbox use `mode` in the tests of the enclosing describe (e.g. describe.each(ISOLATIONS)). */
export function inIsolation(mode: Isolation): void {
  beforeEach(() => {
    isolation = mode;
  });
  afterEach(() => {
    isolation = 'isolate';
  });
}

/** A sandbox with test-sized limits, disposed after the test. */
export async function createSandbox(options: SandboxOptions = {}): Promise<Sandbox> {
  const sandbox = await Sandbox.create({ memoryLimitMb: 128, blockTimeoutMs: 2_000, isolation, ...options });
  open.push(sandbox);
  return sandbox;
}

afterEach(async () => {
  await Promise.all(open.splice(0).map((sandbox) => sandbox.dispose()));
});

/** Runs blocks in order and returns the last result; fails the test if an earlier block errored. */
export async function runBlocks(sandbox: Sandbox, ...blocks: string[]) {
  let result = await sandbox.execute(blocks[0]!);
  for (const block of blocks.slice(1)) {
    if (result.error) throw new Error(`block failed before the last one: ${result.error.stack}`);
    result = await sandbox.execute(block);
  }
  return result;
}
