import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { RLM } from '../../src/index.js';
import { readRunLog } from '../../src/view/log-reader.js';
import { renderPage, runStats } from '../../src/view/render-page.js';
import { models } from '../engine/helpers.js';
import { loggedRun, structuredRun } from './helpers.js';
import { repl } from '../repl.js';
import { tempFolder } from '../temp-folder.js';

const line = (entry: unknown) => JSON.stringify(entry);
const withoutTags = (html: string) => html.replace(/<[^>]*>/g, '');

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
    // The child run's iteration (its code block) sits inside the sub-call that started it.
    const child = page.slice(page.indexOf('class="subcall child-run"'));
    expect(child.indexOf('&quot;seven&quot;')).toBeGreaterThan(0);
    expect(child.indexOf('&quot;seven&quot;')).toBeLessThan(child.indexOf('</details>\n</div>\n</details>'));
    expect(page).toContain('tool · lookup');
    // Code is highlighted, and still escaped.
    expect(page).toMatch(/<pre class="code"><span class="hljs-keyword">const<\/span> child = <span class="hljs-title function_">rlm_query<\/span>\(<span class="hljs-string">&quot;child run: count&quot;<\/span>\)/);
    // Self-contained: nothing is fetched.
    expect(page).not.toMatch(/<(script|link|img)[^>]+(src|href)=/);
  });

  it("shows a sub-call's prompt as its text, not as the JSON of its messages", async () => {
    const page = renderPage(readRunLog((await loggedRun()).text), 'run.jsonl');
    const subcall = page.slice(page.indexOf('<details class="subcall">'), page.indexOf('</details>', page.indexOf('<details class="subcall">')));
    expect(subcall).toMatch(/^<details class="subcall">\n<summary>sub-call · sub · [^<]+ · summarise<\/summary>\n<div class="body">\n  <h4>Prompt<\/h4><pre class="text">summarise<\/pre>/);
    expect(subcall).not.toContain('&#34;role&#34;');
    const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: [{ type: 'text', text: 'Sum ' }, { type: 'text', text: 'these.' }] }];
    const iteration = { type: 'iteration', iteration: 1, prompt: [], response: '', final_answer: null, code_blocks: [{ code: 'x', result: { rlm_calls: [{ root_model: 'sub', prompt: messages, response: 'ok' }] } }] };
    expect(renderPage(readRunLog(line(iteration)), 'x')).toContain('<h4>Prompt</h4><pre class="text">system:\nBe brief.\n\nuser:\nSum these.</pre>');
  });

  it('shows each code block once: the reply points at it, and it follows highlighted', async () => {
    const page = renderPage(readRunLog((await loggedRun()).text), 'run.jsonl');
    expect(page).toContain('<h3>Model reply</h3><pre class="reply">[code block 1, shown below]</pre>');
    expect(page).not.toContain('const child = rlm_query(&#34;child run: count&#34;)');
    // Prose stays, and so does a fence that did not run (or whose code the log does not hold).
    const response = 'Let me look.\n```repl\nprint(1)\n```\nAn example:\n```text\nnot code\n```\n```repl print(2) ```';
    const blocks = [{ code: 'print(1)', result: {} }, { code: 'print(2)', result: {} }];
    const reply = renderPage(readRunLog(line({ type: 'iteration', iteration: 1, prompt: [], response, code_blocks: blocks, final_answer: null })), 'x');
    expect(reply).toContain('<pre class="reply">Let me look.\n[code block 1, shown below]\nAn example:\n```text\nnot code\n```\n[code block 2, shown below]</pre>');
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
    const logDir = tempFolder('rlm-view-forced-');
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

  it('shows the output schema collapsed, the answer as formatted JSON, and marks each rejected FINAL with its problems', async () => {
    const page = renderPage(readRunLog((await structuredRun()).text), 'run.jsonl');
    const schema = page.slice(page.indexOf('<details class="schema" id="output-schema"><summary>Output schema</summary>'), page.indexOf('</details>', page.indexOf('id="output-schema"')));
    expect(withoutTags(schema)).toContain('{\n  &quot;type&quot;: &quot;object&quot;,\n  &quot;properties&quot;: {');
    // The answer, indented and highlighted as JSON, not the one line the log holds.
    const answer = page.slice(page.indexOf('id="answer"'), page.indexOf('</section>', page.indexOf('id="answer"')));
    expect(answer).toContain('<pre class="json">');
    expect(answer).toContain('<span class="hljs-attr">&quot;parties&quot;</span>');
    expect(withoutTags(answer)).toContain('{\n  &quot;parties&quot;: [\n    {\n      &quot;name&quot;: &quot;Acme&quot;,');
    // The first iteration's block and the second iteration's text FINAL are marked, the third is not.
    const iterations = page.split('<details class="iteration root-iteration" open>').slice(1);
    expect(iterations).toHaveLength(3);
    expect(iterations[0]).toMatch(/^\n<summary>Iteration 1 [^\n]* · <span class="rejected-badge">FINAL rejected<\/span><\/summary>/);
    expect(iterations[0]).toContain('<li><code>parties: expected array, received string</code></li><li><code>effective: missing (expected string)</code></li>');
    expect(iterations[0]).toContain('<pre class="rejected-answer">{&#34;parties&#34;:&#34;none&#34;}</pre>');
    expect(iterations[1]).toContain('class="rejected-badge">FINAL rejected</span></summary>');
    expect(iterations[1]).toContain('<pre class="rejected-answer">{parties: [], effective: &#34;x&#34;}</pre>');
    expect(iterations[2]).not.toContain('rejected');
  });

  it('renders a log without an output schema or rejected answers as before', async () => {
    const page = renderPage(readRunLog((await loggedRun()).text), 'run.jsonl');
    expect(page).not.toContain('id="output-schema"');
    expect(page).not.toContain('class="rejected');
    expect(page).not.toContain('<pre class="json">');
    // An answer that happens to be JSON stays as it was given when the run had no schema.
    const log = readRunLog([line({ type: 'metadata' }), line({ type: 'run_end', status: 'completed', answer: '{"a":1}' })].join('\n'));
    expect(renderPage(log, 'x')).toContain('<pre class="text">{&#34;a&#34;:1}</pre>');
  });

  it('shows a partial answer that is not JSON as text when the run had a schema', () => {
    const metadata = line({ type: 'metadata', output_schema: { type: 'object' } });
    const end = line({ type: 'run_end', status: 'error', error: { name: 'RunFailedError', code: 'invalid_output', message: 'no match' }, partialAnswer: 'not {json' });
    expect(renderPage(readRunLog(`${metadata}\n${end}`), 'x')).toContain('<pre class="text">not {json</pre>');
  });
});
