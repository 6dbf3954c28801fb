// `rlm view RESULTS.jsonl`: the batch page. Each task row links to the task's own trajectory page.
// Written to a file, the page links to trajectory pages written next to it, in a folder named
// after it (so the batch page and its trajectories move and share as one folder); served, the
// trajectory pages are rendered on request at /trajectory?id=… from the logs the results name.
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { readBatchResults, type BatchResults, type TaskResult } from '../view/batch-results.js';
import { readRunLog } from '../view/log-reader.js';
import { renderBatchPage } from '../view/render-batch-page.js';
import { renderPage } from '../view/render-page.js';
import type { CommandIo } from './io.js';
import { EXIT, UsageError } from './usage-error.js';
import { openInBrowser, pagePathFor, writePage, type ViewFlags } from './view-pages.js';

/** Writes the batch page (and the trajectory pages it links to) and prints its path. */
export async function writeBatchPage(resultsPath: string, results: BatchResults, flags: ViewFlags, io: CommandIo): Promise<number> {
  const outPath = flags.out ?? pagePathFor(resultsPath);
  const hrefs = writeTrajectoryPages(results.tasks, resultsPath, outPath, io);
  writePage(outPath, renderBatchPage(results, { title: basename(resultsPath), trajectoryHref: (task) => hrefs.get(task) }));
  io.stdout.write(`${outPath}\n`);
  if (flags.open) await openInBrowser(outPath, io);
  return EXIT.ok;
}

export function reportBatchProblems(results: BatchResults, io: CommandIo): void {
  if (results.tornLastLine) io.stderr.write('rlm: the last line of the results is cut off (the batch stopped while writing it, or is still writing): that line is left out.\n');
  for (const problem of results.problems) io.stderr.write(`rlm: skipped ${problem}\n`);
}

/** `<page>-trajectories/`, next to the batch page. */
function trajectoryFolderFor(outPath: string): string {
  return outPath.replace(/\.html?$/, '') + '-trajectories';
}

/**
 * Renders the trajectory of every task that has one into the folder next to the batch page, and
 * returns each task's link to its page, relative to the batch page. A log that cannot be read
 * leaves its task without a link, and is reported once for all.
 */
function writeTrajectoryPages(tasks: TaskResult[], resultsPath: string, outPath: string, io: CommandIo): Map<TaskResult, string> {
  const folder = trajectoryFolderFor(outPath);
  const hrefs = new Map<TaskResult, string>();
  // Per log read: its link, or why it could not be read. Tasks sharing a log share its page.
  const pages = new Map<string, { href: string } | { problem: string }>();
  const taken = new Set<string>();
  for (const task of tasks) {
    if (task.logPath === undefined) continue;
    const logPath = resolveLogPath(task.logPath, resultsPath);
    let page = pages.get(logPath);
    if (!page) {
      page = writeTrajectoryPage(logPath, folder, taken, outPath);
      pages.set(logPath, page);
    }
    if ('href' in page) hrefs.set(task, page.href);
  }
  const unreadable = [...pages.values()].flatMap((page) => ('problem' in page ? [page.problem] : []));
  if (unreadable.length) {
    io.stderr.write(`rlm: ${unreadable.length} trajectory log${unreadable.length === 1 ? '' : 's'} could not be read, so ${unreadable.length === 1 ? 'its task has' : 'their tasks have'} no link: ${unreadable.slice(0, 3).join(', ')}${unreadable.length > 3 ? ', …' : ''}\n`);
  }
  return hrefs;
}

/** Renders one log into `folder`; the link to it from the batch page, or a problem naming why the log could not be read. */
function writeTrajectoryPage(logPath: string, folder: string, taken: Set<string>, outPath: string): { href: string } | { problem: string } {
  let log: string;
  try {
    log = readFileSync(logPath, 'utf8');
  } catch (error) {
    return { problem: `${logPath} (${(error as NodeJS.ErrnoException).code ?? String(error)})` };
  }
  if (taken.size === 0) createFolder(folder);
  const pagePath = join(folder, uniqueName(basename(pagePathFor(logPath)), taken));
  writePage(pagePath, renderPage(readRunLog(log), basename(logPath)));
  return { href: relative(dirname(outPath), pagePath).split(sep).map(encodeURIComponent).join('/') };
}

function createFolder(folder: string): void {
  try {
    mkdirSync(folder, { recursive: true });
  } catch (error) {
    throw new UsageError(`Cannot create ${folder} for the trajectory pages: ${(error as NodeJS.ErrnoException).code ?? String(error)}. Choose another path with --out.`);
  }
}

/** Logs of one batch have distinct names; logs gathered from several folders may not. */
function uniqueName(name: string, taken: Set<string>): string {
  let unique = name;
  for (let count = 2; taken.has(unique); count += 1) unique = name.replace(/\.html$/, `-${count}.html`);
  taken.add(unique);
  return unique;
}

/**
 * A relative log path is as the batch wrote it: relative to where the batch ran. Failing that (the
 * view runs elsewhere), relative to the results file, which is where a batch folder keeps both.
 */
function resolveLogPath(logPath: string, resultsPath: string): string {
  if (isAbsolute(logPath) || existsSync(logPath)) return logPath;
  return resolve(dirname(resultsPath), logPath);
}

/** The served pages: the batch page at `/`, each task's trajectory at `/trajectory?id=…`; rendered from the files as they are now. */
export function routeBatch(url: URL, resultsPath: string, text: string): string | undefined {
  const results = readBatchResults(text);
  if (url.pathname === '/' || url.pathname === '/index.html') {
    const href = (task: TaskResult) => (task.logPath === undefined ? undefined : `trajectory?id=${encodeURIComponent(task.id)}`);
    return renderBatchPage(results, { title: basename(resultsPath), trajectoryHref: href });
  }
  if (url.pathname !== '/trajectory') return undefined;
  // Only logs the results name are served: the id picks one, it never is a path.
  const task = results.tasks.find((candidate) => candidate.id === url.searchParams.get('id'));
  if (task?.logPath === undefined) return undefined;
  const logPath = resolveLogPath(task.logPath, resultsPath);
  return renderPage(readRunLog(readFileSync(logPath, 'utf8')), basename(logPath));
}
