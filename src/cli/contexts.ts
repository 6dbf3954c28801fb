import { readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative } from 'node:path';
import { UsageError } from './usage-error.js';

/** Folders a directory context skips: version control and dependency trees are never the point. */
const SKIPPED_FOLDERS = new Set(['.git', 'node_modules', '.hg', '.svn']);

/**
 * Turns `--context` arguments into the value the sandbox receives: one argument gives its value,
 * several give an array of values. A text file is a string, `.json` is parsed, `.jsonl` is an array
 * of parsed lines, a directory is an array of `{ path, content }`, and `-` is standard input.
 */
export async function loadContexts(sources: string[], readStdin: () => Promise<string>): Promise<unknown> {
  const values: unknown[] = [];
  for (const source of sources) values.push(source === '-' ? await readStdin() : loadPath(source));
  return values.length === 1 ? values[0] : values;
}

function loadPath(path: string): unknown {
  let stats;
  try {
    stats = statSync(path);
  } catch {
    throw new UsageError(`Context file not found: ${path}. Pass an existing file or folder, or - for standard input.`);
  }
  if (stats.isDirectory()) return loadDirectory(path);
  const text = readText(path);
  const extension = extname(path).toLowerCase();
  if (extension === '.json') {
    try {
      return JSON.parse(text);
    } catch (error) {
      throw new UsageError(`Context file ${path} is not valid JSON: ${(error as Error).message}`);
    }
  }
  if (extension === '.jsonl' || extension === '.ndjson') {
    return text
      .split('\n')
      .map((line, index) => ({ line: line.trim(), number: index + 1 }))
      .filter(({ line }) => line !== '')
      .map(({ line, number }) => {
        try {
          return JSON.parse(line) as unknown;
        } catch (error) {
          throw new UsageError(`Context file ${path}, line ${number}, is not valid JSON: ${(error as Error).message}`);
        }
      });
  }
  return text;
}

function loadDirectory(root: string): { path: string; content: string }[] {
  const files: { path: string; content: string }[] = [];
  const visit = (folder: string) => {
    for (const entry of readdirSync(folder, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const full = join(folder, entry.name);
      if (entry.isDirectory()) {
        if (!SKIPPED_FOLDERS.has(entry.name)) visit(full);
      } else if (entry.isFile()) {
        const content = readText(full);
        if (!content.includes('\u0000')) files.push({ path: relative(root, full), content }); // binary files are skipped
      }
    }
  };
  visit(root);
  return files;
}

function readText(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new UsageError(`Cannot read context file ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
}
