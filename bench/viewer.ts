// `rlm view` on a big log, as the viewer's users meet it: a 10 MB context explored by 200 sub-calls
// (each shown a 200 KB slice) over 10 iterations, about 40 MB of JSONL. Timed: the whole `rlm view`
// process, against reading and parsing the log in this process as the floor; then, when Chromium is
// present, the page's load and a search in it.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { packageRoot } from '../src/paths.js';
import { median, ms, printTable, ratio } from './report.js';

const RUNS = 3;
const BIN = join(packageRoot(), 'bin', 'rlm.js');
const ITERATIONS = 10;
const SUBCALLS_PER_ITERATION = 20;
const SLICE = 200_000;

function bigLog(): string {
  const context = 'lorem ipsum dolor sit amet '.repeat(Math.ceil((10 * 2 ** 20) / 27)).slice(0, 10 * 2 ** 20);
  const lines = [JSON.stringify({ type: 'metadata', root_model: 'root', max_depth: 1, max_iterations: 30, query: 'What does the corpus say?', other_backends: ['sub'] })];
  const history: { role: string; content: string }[] = [{ role: 'system', content: 'You answer with a REPL. '.repeat(300) }];
  for (let iteration = 1; iteration <= ITERATIONS; iteration++) {
    const code = `const parts = []; for (let i = 0; i < ${SUBCALLS_PER_ITERATION}; i++) parts.push(context.slice(i * ${SLICE}, (i + 1) * ${SLICE}));\nconst answers = llm_query_batched(parts.map((p) => "Summarise: " + p));\nprint(answers.join("\\n"))`;
    const subcalls = Array.from({ length: SUBCALLS_PER_ITERATION }, (_, index) => {
      const start = ((iteration - 1) * SUBCALLS_PER_ITERATION + index) * SLICE;
      return { root_model: 'sub', prompt: `Summarise: ${context.slice(start % context.length, (start % context.length) + SLICE)}`, response: `Part ${index}: about lorem ipsum.`, usage_summary: { model_usage_summaries: { sub: { total_calls: 1, total_input_tokens: 12_000, total_output_tokens: 10 } } }, execution_time: 0.8 };
    });
    const stdout = subcalls.map((call) => call.response).join('\n');
    history.push({ role: 'assistant', content: '```repl\n' + code + '\n```' }, { role: 'user', content: `Code executed:\n${stdout}` });
    lines.push(
      JSON.stringify({
        type: 'iteration',
        iteration,
        prompt: history,
        response: '```repl\n' + code + '\n```',
        code_blocks: [{ code, result: { stdout, stderr: '', locals: { parts: 'Array(20)', answers: 'Array(20)' }, execution_time: 2, rlm_calls: subcalls, final_answer: null, tool_calls: [] } }],
        final_answer: iteration === ITERATIONS ? 'The corpus is lorem ipsum.' : null,
        iteration_time: 3,
      }),
    );
  }
  lines.push(JSON.stringify({ type: 'run_end', status: 'completed', answer: 'The corpus is lorem ipsum.', usage: { byModel: {}, calls: 210 } }));
  return `${lines.join('\n')}\n`;
}

function chromiumPath(): string | undefined {
  try {
    return process.env.CHROMIUM_PATH ?? (execFileSync('which', ['chromium'], { encoding: 'utf8' }).trim() || undefined);
  } catch {
    return undefined;
  }
}

export async function runViewerBench(): Promise<void> {
  const folder = mkdtempSync(join(tmpdir(), 'rlm-bench-viewer-'));
  try {
    const logPath = join(folder, 'run.jsonl');
    writeFileSync(logPath, bigLog());
    const pagePath = join(folder, 'run.html');
    const parse: number[] = [];
    const view: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      let started = performance.now();
      readFileSync(logPath, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line));
      parse.push(performance.now() - started);
      started = performance.now();
      const result = spawnSync(process.execPath, [BIN, 'view', logPath], { stdio: ['ignore', 'ignore', 'pipe'] });
      view.push(performance.now() - started);
      if (result.status !== 0) throw new Error(`rlm view failed: ${result.stderr.toString()}`);
    }
    const mb = (path: string) => `${(statSync(path).size / 2 ** 20).toFixed(1)} MB`;
    const rows = [['rlm view (whole process)', ms(median(view)), `read + JSON.parse in-process: ${ms(median(parse))}`, ratio(median(view), median(parse)), `log ${mb(logPath)} -> page ${mb(pagePath)}`]];

    const browserPath = chromiumPath();
    if (browserPath) {
      const { chromium } = await import('playwright-core');
      const browser = await chromium.launch({ executablePath: browserPath, args: ['--no-sandbox'] });
      try {
        const load: number[] = [];
        const search: number[] = [];
        for (let run = 0; run < RUNS; run++) {
          const page = await browser.newPage();
          let started = performance.now();
          await page.goto(pathToFileURL(pagePath).href, { waitUntil: 'load', timeout: 120_000 });
          load.push(performance.now() - started);
          started = performance.now();
          await page.fill('#search', 'Part 7:');
          await page.waitForFunction(() => document.getElementById('matches')!.textContent !== '', undefined, { timeout: 120_000 });
          search.push(performance.now() - started);
          await page.close();
        }
        rows.push(['page load in Chromium (file://, to the load event)', ms(median(load)), '', '', 'target: a few seconds']);
        rows.push(['search "Part 7:" (incl. 150 ms debounce)', ms(median(search)), '', '', '']);
      } finally {
        await browser.close();
      }
    } else rows.push(['page load in Chromium', 'skipped', 'no chromium found', '', '']);
    printTable(`rlm view on a big log (median of ${RUNS}; ${ITERATIONS} iterations, ${ITERATIONS * SUBCALLS_PER_ITERATION} sub-calls of ${SLICE / 1000} KB)`, ['figure', 'measured', 'baseline', 'ratio', 'sizes'], rows);
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}
