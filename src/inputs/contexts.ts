import { closeSync, openSync, readdirSync, readFileSync, readSync, statSync } from 'node:fs';
import { extname, join, relative } from 'node:path';
import { ConfigurationError } from '../errors.js';
import { fileContext } from '../sandbox/context-file.js';
import { isJsonText } from '../json-text.js';

/** Folders a directory context skips: version control and dependency trees are never the point. */
const SKIPPED_FOLDERS = new Set(['.git', 'node_modules', '.hg', '.svn']);

export type ContextFormat = 'text' | 'json' | 'jsonl';

interface ContextSources {
  /** `--context` arguments: files, folders, `-` for standard input. */
  sources: string[];
  /**
   * Reads standard input as bytes (once). Absent where standard input is not the user's (rlm mcp
   * speaks its protocol there): `-` is then refused, and no message suggests it.
   */
  readStdin?: (() => Promise<Buffer>) | undefined;
  /** `--format`: how to read every context, instead of by extension (files) or content (stdin). */
  format?: ContextFormat | undefined;
  /** Whether messages may suggest `--format` (rlm run has the flag; the MCP tool has no such argument). */
  formatFlag?: boolean;
  /** Says what was done that the user should know (a file decoded as Latin-1, binary files skipped). */
  notice: (text: string) => void;
}

/**
 * Turns `--context` arguments into the value the sandbox receives: one argument gives its value,
 * several give an array of values. A file is read by its extension (`.json` parsed, `.jsonl` an
 * array of parsed lines, anything else text), standard input by its content (JSON, JSON Lines or
 * text), and a folder is an array of `{ path, content }` of its text files.
 */
export async function loadContexts(options: ContextSources): Promise<unknown> {
  const { sources, readStdin, format, notice } = options;
  if (sources.includes('-') && !readStdin) throw new ConfigurationError('Standard input cannot be read here: pass files or folders.');
  if (sources.filter((source) => source === '-').length > 1) {
    throw new ConfigurationError('Standard input can be read only once: pass --context - a single time.');
  }
  const single = sources.length === 1 ? largeTextFile(sources[0]!, format) : undefined;
  if (single) return fileContext(single);
  const values: unknown[] = [];
  for (const source of sources) {
    if (source === '-') values.push(parseText(decode(await readStdin!(), 'standard input', notice), format ?? detectFormat, 'standard input', options));
    else values.push(loadPath(source, options));
  }
  return values.length === 1 ? values[0] : values;
}

function loadPath(path: string, options: ContextSources): unknown {
  const { format, notice } = options;
  let stats;
  try {
    stats = statSync(path);
  } catch {
    throw new ConfigurationError(`Context file not found: ${path}. Pass an existing file or folder${options.readStdin ? ', or - for standard input' : ''}.`);
  }
  if (stats.isDirectory()) return loadDirectory(path, notice);
  const bytes = readBytes(path);
  if (looksBinary(bytes)) {
    throw new ConfigurationError(`Context file ${path} looks binary (it has NUL bytes), not text: rlm reads text, JSON and JSON Lines. Convert it to text first.`);
  }
  return parseText(decode(bytes, path, notice), format ?? formatByExtension(path), path, options);
}

/** From this size on, a text file given alone is read by the sandbox worker, not by this process. */
const WORKER_READ_BYTES = 8 * 2 ** 20;

/**
 * A single large text file is the common big input: the worker reads it itself (see fileContext),
 * after a look at its first 64 KB here shows text in UTF-8 (binary files are still refused, and
 * UTF-16 or Latin-1 files still decoded here).
 */
function largeTextFile(source: string, format: ContextFormat | undefined): string | undefined {
  if (source === '-' || (format ?? formatByExtension(source)) !== 'text') return undefined;
  let head: Buffer;
  try {
    if (statSync(source).size < WORKER_READ_BYTES) return undefined;
    const descriptor = openSync(source, 'r');
    head = Buffer.alloc(65_536);
    head = head.subarray(0, readSync(descriptor, head, 0, head.length, 0));
    closeSync(descriptor);
  } catch {
    return undefined; // loadPath says what is wrong
  }
  if (looksBinary(head) || utf16Order(head)) return undefined;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(head, { stream: true });
  } catch {
    return undefined;
  }
  return source;
}

function formatByExtension(path: string): ContextFormat {
  const extension = extname(path).toLowerCase();
  if (extension === '.json') return 'json';
  return extension === '.jsonl' || extension === '.ndjson' ? 'jsonl' : 'text';
}

/** Standard input has no extension: JSON if it parses as one value, JSON Lines if every line does. */
function detectFormat(text: string): ContextFormat {
  const trimmed = text.trim();
  if (!/^[[{]/.test(trimmed)) return 'text';
  try {
    JSON.parse(trimmed);
    return 'json';
  } catch {
    const lines = trimmed.split('\n').filter((line) => line.trim() !== '');
    return lines.length > 1 && lines.every(isJsonText) ? 'jsonl' : 'text';
  }
}


function parseText(text: string, format: ContextFormat | ((text: string) => ContextFormat), label: string, options: ContextSources): unknown {
  const chosen = typeof format === 'function' ? format(text) : format;
  if (chosen === 'text') return text;
  // A file named .json that is not JSON is still worth reading: say how to read it as it is.
  const asText = options.formatFlag ? '; pass --format text to read it as plain text' : '';
  if (chosen === 'json') {
    try {
      return JSON.parse(text);
    } catch (error) {
      throw new ConfigurationError(`Context ${label} is not valid JSON: ${(error as Error).message}${asText}`);
    }
  }
  return text
    .split('\n')
    .map((line, index) => ({ line: line.trim(), number: index + 1 }))
    .filter(({ line }) => line !== '')
    .map(({ line, number }) => {
      try {
        return JSON.parse(line) as unknown;
      } catch (error) {
        throw new ConfigurationError(`Context ${label}, line ${number}, is not valid JSON: ${(error as Error).message}${asText}`);
      }
    });
}

function loadDirectory(root: string, notice: (text: string) => void): { path: string; content: string }[] {
  const files: { path: string; content: string }[] = [];
  let binary = 0;
  const visit = (folder: string) => {
    for (const entry of readdirSync(folder, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const full = join(folder, entry.name);
      if (entry.isDirectory()) {
        if (!SKIPPED_FOLDERS.has(entry.name)) visit(full);
      } else if (entry.isFile()) {
        const bytes = readBytes(full);
        if (looksBinary(bytes)) binary++;
        else files.push({ path: relative(root, full), content: decode(bytes, full, notice) });
      }
    }
  };
  visit(root);
  if (binary > 0) notice(`skipped ${binary} binary file${binary === 1 ? '' : 's'} in ${root}`);
  return files;
}

function readBytes(path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (error) {
    throw new ConfigurationError(`Cannot read context file ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
}

/** NUL bytes in the first 8 KB mean binary, except in UTF-16, where every ASCII character has one. */
function looksBinary(bytes: Buffer): boolean {
  return utf16Order(bytes) === undefined && bytes.subarray(0, 8_192).includes(0);
}

function utf16Order(bytes: Buffer): 'le' | 'be' | undefined {
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return 'le';
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return 'be';
  return undefined;
}

/** UTF-8 (the usual case), UTF-16 with a byte order mark, or else Latin-1, said as a notice. */
function decode(bytes: Buffer, label: string, notice: (text: string) => void): string {
  const order = utf16Order(bytes);
  const body = bytes.subarray(2, bytes.length - ((bytes.length - 2) % 2));
  if (order === 'le') return body.toString('utf16le');
  if (order === 'be') return Buffer.from(body).swap16().toString('utf16le');
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    notice(`${label} is not valid UTF-8: read it as Latin-1 (ISO-8859-1)`);
    return bytes.toString('latin1');
  }
}
