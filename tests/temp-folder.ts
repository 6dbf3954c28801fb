import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

const created: string[] = [];

// Registered when a test file first imports this module (each file has its own module graph), and
// registered first, so it runs after the file's other afterAll hooks have stopped what writes here.
afterAll(() => {
  for (const folder of created.splice(0)) rmSync(folder, { recursive: true, force: true });
});

/** A new empty folder in the system's temp folder, removed once the test file's tests are done. */
export function tempFolder(prefix: string): string {
  const folder = mkdtempSync(join(tmpdir(), prefix));
  created.push(folder);
  return folder;
}
