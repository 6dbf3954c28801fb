// What both pages of `rlm view` (a run, a batch) share: where a page is written, how pages are
// served on loopback, and how one is opened in a browser.
import { spawn } from 'node:child_process';
import { statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
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

/** Where the page of a log (or results file) goes unless --out says: next to it, with .html. */
export function pagePathFor(path: string): string {
  return path.replace(/\.jsonl?$/, '') + '.html';
}

export function writePage(outPath: string, page: string): void {
  try {
    writeFileSync(outPath, page);
  } catch (error) {
    throw new UsageError(`Cannot write ${outPath}: ${(error as NodeJS.ErrnoException).code ?? String(error)}. Choose another path with --out.`);
  }
}

/**
 * Serves the pages `route` renders (undefined: 404) on loopback until a stop signal. `watchedPath`
 * is the file whose changes a following page (`--follow`) reloads on.
 */
export async function servePages(watchedPath: string, route: (url: URL) => string | undefined, flags: ViewFlags, io: CommandIo): Promise<number> {
  // A following page knows the file version it was rendered from, asks for the current one every
  // second, and reloads when they differ.
  const followScript = (version: string) =>
    `<script>(() => { const shown = ${JSON.stringify(version)}; const timer = setInterval(async () => { try { if ((await (await fetch('/version')).text()) !== shown) { clearInterval(timer); location.reload(); } } catch {} }, 1000); })();</script>`;
  const server = createServer((request, response) => {
    try {
      const url = new URL(request.url ?? '/', 'http://localhost');
      if (url.pathname === '/version') {
        response.writeHead(200, { 'content-type': 'text/plain', 'cache-control': 'no-store' }).end(logVersion(watchedPath));
        return;
      }
      // The version is taken before the read: a line appended in between makes the page reload once more.
      const version = logVersion(watchedPath);
      let page = route(url);
      if (page === undefined) {
        response.writeHead(404).end('not found');
        return;
      }
      if (flags.follow && (url.pathname === '/' || url.pathname === '/index.html')) page = page.replace('</body>', `${followScript(version)}</body>`);
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' }).end(page);
    } catch (error) {
      response.writeHead(500, { 'content-type': 'text/plain' }).end(`Cannot render the page: ${(error as Error).message}`);
    }
  });
  // Loopback only: a log holds prompts, context slices and answers.
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(flags.port ?? 0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  const url = `http://127.0.0.1:${port}/`;
  io.stdout.write(`${url}\n`);
  io.stderr.write(`rlm: serving ${watchedPath}${flags.follow ? ', updating the page as the file grows' : ''}; Ctrl-C stops.\n`);
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
export function openInBrowser(target: string, io: CommandIo): Promise<void> {
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
