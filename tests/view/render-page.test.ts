import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { RLM } from '../../src/index.js';
import { readRunLog } from '../../src/view/log-reader.js';
import { renderPage, runStats } from '../../src/view/render-page.js';
import { models, repl } from '../engine/helpers.js';
import { loggedRun } from './helpers.js';

const line = (entry: unknown) => JSON.stringify(entry);

describe('renderPage', () => {
  it('shows the question, the answer, the stats over the whole tree and the child run nested in its block', async () => {
    const log = readRunLog((await loggedRun('Which <b>parts</b>?')).text);
    expect(runStats(log)).toMatchObject({ iterations: 2, codeBlocks: 2, subcalls: 1, childRuns: 1, toolCalls: 1 });
    expect(Object.keys(runStats(log).byModel).sort()).toEqual(['root', 'sub']);
    const page = renderPage(log, 'run.jsonl');
    expect(page).toContain('Which &#60;b&#62;parts&#60;/b&#62;?');
    expect(page).not.toContain('<b>parts</b>');
    expect(page).toMatch(/id="status">completed</);
    expect(page).toMatch(/<pre class="text">all done<\/pre>/);
    // The child run's iteration sits inside the sub-call that started it.
    const child = page.slice(page.indexOf('class="subcall child-run"'));
    expect(child.indexOf('FINAL(&#34;seven&#34;)')).toBeGreaterThan(0);
    expect(child.indexOf('FINAL(&#34;seven&#34;)')).toBeLessThan(child.indexOf('</details>\n</div>\n</details>'));
    expect(page).toContain('tool · lookup');
    // Code is highlighted, and still escaped.
    expect(page).toMatch(/<pre class="code"><span class="hljs-keyword">const<\/span> child = <span class="hljs-title function_">rlm_query<\/span>\(<span class="hljs-string">&quot;child run: count&quot;<\/span>\)/);
    // Self-contained: nothing is fetched.
    expect(page).not.toMatch(/<(script|link|img)[^>]+(src|href)=/);
  });

  it('marks failed and forced runs, and logs that end early', () => {
    const iteration = { type: 'iteration', iteration: 1, prompt: [], response: 'thinking', code_blocks: [], final_answer: null, iteration_time: 0.1 };
    const failed = renderPage(readRunLog([line({ type: 'metadata' }), line(iteration), line({ type: 'run_end', status: 'limit', error: { name: 'RunLimitError', code: 'max_budget', message: 'budget spent' }, partialAnswer: 'half' })].join('\n')), 'x');
    expect(failed).toMatch(/class="answer failed"/);
    expect(failed).toContain('Partial answer');
    expect(failed).toContain('RunLimitError · max_budget: budget spent');
    const forced = renderPage(readRunLog([line(iteration), line({ type: 'run_end', status: 'completed', answer: 'best guess' })].join('\n')), 'x');
    expect(forced).toContain('id="forced">forced');
    expect(forced).not.toContain('id="ends-early"');
    const cut = renderPage(readRunLog(`${line(iteration)}\n{"type":"iter`), 'x');
    expect(cut).toContain('id="ends-early"');
    expect(cut).toMatch(/id="status">unfinished</);
  });

  it('marks an answer forced at the iteration limit from what the log says', async () => {
    const { languageModel } = models([repl('print(1)'), 'FINAL(late)']);
    const logDir = mkdtempSync(join(tmpdir(), 'rlm-view-forced-'));
    const result = await new RLM({ model: 'root', languageModel, maxIterations: 1, logDir }).completion('c');
    const log = readRunLog(readFileSync(result.logPath!, 'utf8'));
    expect(log.end).toMatchObject({ status: 'completed', answer: 'late', forced: true });
    expect(renderPage(log, 'x')).toContain('id="forced">forced');
  });

  it('shows a compaction after the iteration it followed', () => {
    const iteration = (index: number) => line({ type: 'iteration', iteration: index, prompt: [], response: `reply ${index}`, code_blocks: [], final_answer: null });
    const log = readRunLog([iteration(1), line({ type: 'compaction', after_iteration: 1, tokens_before: 5100, tokens_after: 2000, summary: 'learned a lot' }), iteration(2)].join('\n'));
    expect(log.problems).toEqual([]);
    const page = renderPage(log, 'x');
    expect(page).toContain('Conversation compacted · 5,100 → 2,000 tokens');
    expect(page.indexOf('reply 1')).toBeLessThan(page.indexOf('learned a lot'));
    expect(page.indexOf('learned a lot')).toBeLessThan(page.indexOf('reply 2'));
  });

  it('cuts long texts to a preview with a control that holds the whole text', () => {
    const long = 'x'.repeat(10_000) + 'THE END';
    const page = renderPage(readRunLog(line({ type: 'iteration', iteration: 1, prompt: [], response: long, code_blocks: [], final_answer: null })), 'x');
    expect(page).toContain('show all 10,007 characters');
    expect(page.split('THE END')).toHaveLength(2);
  });
});
