import { closeSync, mkdirSync, openSync, rmSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { ConfigurationError } from './errors.js';

/**
 * Makes sure `folder` exists and takes new files, or says why not. Folders are created one level at
 * a time: Node's recursive mkdir never returns under some virtual file systems (/proc), and a
 * folder that cannot be written must be reported before a run starts, not when its first
 * iteration is logged.
 */
export function prepareLogFolder(folder: string): string {
  const path = resolve(folder);
  try {
    createFolder(path);
    const probe = join(path, `.rlm-write-test-${process.pid}`);
    closeSync(openSync(probe, 'wx'));
    rmSync(probe, { force: true });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason = REASONS[code ?? ''] ?? (error as Error).message;
    throw new ConfigurationError(`Cannot write the log to ${folder}: ${reason}. Choose another folder with --log-dir (logDir).`, { cause: error });
  }
  return path;
}

const REASONS: Record<string, string> = {
  ENOTDIR: 'it (or a folder above it) is a file, not a folder',
  EEXIST: 'it exists and is not a folder',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EROFS: 'the file system is read-only',
  ENOENT: 'a folder above it cannot be created',
};

function createFolder(path: string): void {
  const missing: string[] = [];
  for (let current = path; !exists(current); current = dirname(current)) {
    if (dirname(current) === current) break;
    missing.unshift(current);
  }
  for (const folder of missing) mkdirSync(folder);
  if (!statSync(path).isDirectory()) throw Object.assign(new Error('not a folder'), { code: 'EEXIST' });
}

function exists(path: string): boolean {
  try {
    statSync(path);
    return true;
  } catch {
    return false;
  }
}
