import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { InstallationError } from './errors.js';

let cachedRoot: string | undefined;

/**
 * The installed package's root folder. Found by walking up from this module, so it is the same
 * whether the code runs from the bundle in dist/ or from src/ under the test runner.
 */
export function packageRoot(): string {
  if (cachedRoot) return cachedRoot;
  let folder = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = join(folder, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'rlm') {
      cachedRoot = folder;
      return folder;
    }
    const parent = dirname(folder);
    if (parent === folder) throw new InstallationError('rlm: cannot find the package root (package.json named "rlm")');
    folder = parent;
  }
}

/** The bundled sandbox worker script (built by `npm run build`). */
export const sandboxWorkerPath = () => join(packageRoot(), 'dist', 'sandbox-worker.js');
