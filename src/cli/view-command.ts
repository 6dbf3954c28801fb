import { spawn } from 'node:child_process';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { basename } from 'node:path';
import { readRunLog, type RunLog } from '../view/log-reader.js';
import { renderPage } from '../view/render-page.js';
import type { CommandIo } from './io.js';
import { stopRequested } from './stop-signals.js';
import { EXIT, UsageError } from './usage-error.js';

/** The flags of `rlm view`, as commander parses them. */
export interface ViewFlags {
  out?: string;
  serve?: boolean;
  follow?: boolean;
  open?: boolean;
  port?: number;
}

/**
 * `rlm view <log>`: writes the run as one self-contained HTML page and prints its path; with
 * `--serve`, serves it on localhost instead (re-read on every request, so `--follow` only has to
 * tell the page when the log changed) until a stop signal.
 */
export async function viewCommand(logPath: string, flags: ViewFlags, io: CommandIo): Promise<number> {
  if (flags.follow && !flags.serve) throw new UsageError('--follow updates a served page: use it with --serve.');
  const log = readLog(logPath, Boolean(flags.follow));
  reportProblems(log, io);
  if (flags.serve) return servePage(logPath, flags, io);
  const outPath = flags.out ?? logPath.replace(/\.jsonl?$/, '') + '.html';
  try {
    writeFileSync(outPath, renderPage(log, basename(logPath)));
  } catch (error) {
    throw new UsageError(`Cannot write ${outPath}: ${(error as NodeJS.ErrnoException).code ?? String(error)}. Choose another path with --out.`);
  }
  io.stdout.write(`${outPath}\n`);
  if (flags.open) await openInBrowser(outPath, io);
  return EXIT.ok;
}

/** A log that has not got its first line yet is fine to follow, not to show. */
function readLog(logPath: string, following: boolean): RunLog {
  let text: string;
  try {
    text = readFileSync(logPath, 'utf8');
  } catch (error) {
    throw new UsageError(`Cannot read the log ${logPath}: ${(error as NodeJS.ErrnoException).code ?? String(error)}. Pass a .jsonl file written with --log-dir.`);
  }
  const log = readRunLog(text);
  if (!following && !log.metadata && log.iterations.length === 0) {
    throw new UsageError(`${logPath} holds no run: expected the JSONL that rlm writes with --log-dir (or the reference RLM logger's).`);
  }
  return log;
}

function reportProblems(log: RunLog, io: CommandIo): void {
  if (log.endsEarly) io.stderr.write('rlm: the log ends early (the run crashed or is still running): the page shows what it holds.\n');
  for (const problem of log.problems) io.stderr.write(`rlm: skipped ${problem}\n`);
}

async function servePage(logPath: string, flags: ViewFlags, io: CommandIo): Promise<number> {
  // A following page knows the log version it was rendered from, asks for the current one every
  // second, and reloads when they differ.
  const followScript = (version: string) =>
    `<script>(() => { const shown = ${JSON.stringify(version)}; const timer = setInterval(async () => { try { if ((await (await fetch('/version')).text()) !== shown) { clearInterval(timer); location.reload(); } } catch {} }, 1000); })();</script>`;
  const server = createServer((request, response) => {
    try {
      if (request.url === '/version') {
        response.writeHead(200, { 'content-type': 'text/plain', 'cache-control': 'no-store' }).end(logVersion(logPath));
      } else if (request.url === '/' || request.url === '/index.html') {
        // The version is taken before the read: a line appended in between makes the page reload once more.
        const version = logVersion(logPath);
        let page = renderPage(readRunLog(readFileSync(logPath, 'utf8')), basename(logPath));
        if (flags.follow) page = page.replace('</body>', `${followScript(version)}</body>`);
        response.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' }).end(page);
      } else response.writeHead(404).end('not found');
    } catch (error) {
      response.writeHead(500, { 'content-type': 'text/plain' }).end(`Cannot read ${logPath}: ${(error as Error).message}`);
    }
  });
  // Loopback only: a log holds prompts, context slices and answers.
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(flags.port ?? 0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  const url = `http://127.0.0.1:${port}/`;
  io.stdout.write(`${url}\n`);
  io.stderr.write(`rlm: serving ${logPath}${flags.follow ? ', updating the page as the log grows' : ''}; Ctrl-C stops.\n`);
  if (flags.open) await openInBrowser(url, io);
  await stopRequested(io.interrupt);
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return EXIT.ok;
}

function logVersion(logPath: string): string {
  const stat = statSync(logPath);
  return `${stat.size}:${stat.mtimeMs}`;
}

/** Resolves once the opener started, or said it cannot: the command may end right after. */
function openInBrowser(target: string, io: CommandIo): Promise<void> {
  const command = process.platform === 'darwin' ? 'open' : process.platform === 'win32' ? 'explorer' : 'xdg-open';
  return new Promise((resolve) => {
    const child = spawn(command, [target], { stdio: 'ignore', detached: true });
    child.once('spawn', () => {
      child.unref();
      resolve();
    });
    child.once('error', () => {
      io.stderr.write(`rlm: no browser could be opened (${command} is missing): open ${target} yourself.\n`);
      resolve();
    });
  });
}
