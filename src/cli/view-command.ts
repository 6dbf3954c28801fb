import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { isBatchResults, readBatchResults } from '../view/batch-results.js';
import { readRunLog, type RunLog } from '../view/log-reader.js';
import { renderPage } from '../view/render-page.js';
import type { CommandIo } from './io.js';
import { EXIT, UsageError } from './usage-error.js';
import { reportBatchProblems, routeBatch, writeBatchPage } from './view-batch.js';
import { openInBrowser, pagePathFor, servePages, writePage, type ViewFlags } from './view-pages.js';

/**
 * `rlm view <log>`: writes the run as one self-contained HTML page and prints its path; with
 * `--serve`, serves it on localhost instead (re-read on every request, so `--follow` only has to
 * tell the page when the log changed) until a stop signal. A batch's results file gets the batch
 * page instead (view-batch.ts).
 */
export async function viewCommand(logPath: string, flags: ViewFlags, io: CommandIo): Promise<number> {
  if (flags.follow && !flags.serve) throw new UsageError('--follow updates a served page: use it with --serve.');
  const text = readViewedFile(logPath);
  const results = isBatchResults(text) ? readBatchResults(text) : undefined;
  if (results) reportBatchProblems(results, io);
  else reportProblems(readLog(text, logPath, Boolean(flags.follow)), io);
  if (flags.serve) return servePages(logPath, (url) => routeViewed(url, logPath), flags, io);
  if (results) return writeBatchPage(logPath, results, flags, io);
  const outPath = flags.out ?? pagePathFor(logPath);
  writePage(outPath, renderPage(readRunLog(text), basename(logPath)));
  io.stdout.write(`${outPath}\n`);
  if (flags.open) await openInBrowser(outPath, io);
  return EXIT.ok;
}

/**
 * The served pages, from the file as it is now. What it holds is told again on every request: a
 * batch followed from its start has an empty results file, which is not yet a results file.
 */
function routeViewed(url: URL, path: string): string | undefined {
  const text = readFileSync(path, 'utf8');
  if (isBatchResults(text)) return routeBatch(url, path, text);
  return url.pathname === '/' || url.pathname === '/index.html' ? renderPage(readRunLog(text), basename(path)) : undefined;
}

function readViewedFile(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new UsageError(`Cannot read the log ${path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}. Pass a .jsonl file written with --log-dir, or the results file of rlm batch.`);
  }
}

/** A log that has not got its first line yet is fine to follow, not to show. */
function readLog(text: string, logPath: string, following: boolean): RunLog {
  const log = readRunLog(text);
  if (!following && !log.metadata && log.iterations.length === 0) {
    throw new UsageError(`${logPath} holds no run: expected the JSONL that rlm writes with --log-dir (or the reference RLM logger's), or the results file of rlm batch.`);
  }
  return log;
}

function reportProblems(log: RunLog, io: CommandIo): void {
  if (log.endsEarly) io.stderr.write('rlm: the log ends early (the run crashed or is still running): the page shows what it holds.\n');
  for (const problem of log.problems) io.stderr.write(`rlm: skipped ${problem}\n`);
}
