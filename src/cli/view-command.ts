import { readFileSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';
import { readRunLog } from '../view/log-reader.js';
import { renderPage } from '../view/render-page.js';
import type { CommandIo } from './io.js';
import { EXIT, UsageError } from './usage-error.js';

/** The flags of `rlm view`, as commander parses them. */
export interface ViewFlags {
  out?: string;
}

/** `rlm view <log>`: writes the run as one self-contained HTML page and prints its path. */
export async function viewCommand(logPath: string, flags: ViewFlags, io: CommandIo): Promise<number> {
  let text: string;
  try {
    text = readFileSync(logPath, 'utf8');
  } catch (error) {
    throw new UsageError(`Cannot read the log ${logPath}: ${(error as NodeJS.ErrnoException).code ?? String(error)}. Pass a .jsonl file written with --log-dir.`);
  }
  const log = readRunLog(text);
  if (!log.metadata && log.iterations.length === 0) throw new UsageError(`${logPath} holds no run: expected the JSONL that rlm writes with --log-dir (or the reference RLM logger's).`);
  const outPath = flags.out ?? logPath.replace(/\.jsonl?$/, '') + '.html';
  try {
    writeFileSync(outPath, renderPage(log, basename(logPath)));
  } catch (error) {
    throw new UsageError(`Cannot write ${outPath}: ${(error as NodeJS.ErrnoException).code ?? String(error)}. Choose another path with --out.`);
  }
  if (log.endsEarly) io.stderr.write('rlm: the log ends early (the run crashed or is still running): the page shows what it holds.\n');
  for (const problem of log.problems) io.stderr.write(`rlm: skipped ${problem}\n`);
  io.stdout.write(`${outPath}\n`);
  return EXIT.ok;
}
