import { closeSync, existsSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Contexts reach the worker through a private temporary file, not the frame channel: streaming
 * 100 MB through a socket costs one process wake-up per 64 KB chunk (over 100 us each on small
 * VMs), while a file on tmpfs is one write here and one read there. The string is written in
 * slices, so the host never holds a second full-size copy.
 */
interface ContextFile {
  path: string;
  /** Pure ASCII is decoded as latin1 by the worker, the fastest decoder. */
  encoding: 'latin1' | 'utf8';
  /** Size of the file: the text's UTF-8 length. */
  bytes: number;
  remove(): void;
}

const SLICE_CHARS = 1 << 22;
let folder: string | undefined;
let counter = 0;

function transferFolder(): string {
  if (!folder) {
    const base = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
    folder = mkdtempSync(join(base, 'rlm-'));
    process.once('exit', () => rmSync(folder!, { recursive: true, force: true }));
  }
  return folder;
}

export function writeContextFile(text: string): ContextFile {
  const path = join(transferFolder(), `context-${process.pid}-${counter++}`);
  const descriptor = openSync(path, 'w', 0o600);
  let bytes = 0;
  try {
    for (let start = 0; start < text.length; start += SLICE_CHARS) {
      bytes += writeSync(descriptor, text.slice(start, start + SLICE_CHARS), null, 'utf8');
    }
  } finally {
    closeSync(descriptor);
  }
  return {
    path,
    encoding: bytes === text.length ? 'latin1' : 'utf8',
    bytes,
    remove: () => rmSync(path, { force: true }),
  };
}
