import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import { ConfigurationError } from '../errors.js';

const BRAND = Symbol.for('rlm.fileContext');

/** A text file to load as the context without the host reading it (see `fileContext`). */
export interface FileContext {
  readonly file: string;
  /** Its size: its length in characters when the text is ASCII. */
  readonly bytes: number;
}

/**
 * A context that the sandbox worker reads from a UTF-8 text file itself: the host never holds the
 * text, which for a 100 MB file saves a read, a decode and a copy through a temporary file. Model
 * code sees `context` as the file's text, as if the string had been passed.
 *
 * @example
 * await rlm.completion({ context: fileContext('logs/2026-11.txt'), query: 'Which service failed first?' });
 */
export function fileContext(path: string): FileContext {
  const file = resolve(path);
  let stats;
  try {
    stats = statSync(file);
  } catch {
    throw new ConfigurationError(`Context file not found: ${path}`);
  }
  if (!stats.isFile()) throw new ConfigurationError(`Context file ${path} is not a file`);
  return Object.freeze({ [BRAND]: true, file, bytes: stats.size });
}

export function isFileContext(value: unknown): value is FileContext {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
}
