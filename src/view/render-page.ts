// Renders a run tree (log-reader.ts) as one self-contained HTML page: inline styles and script, no
// network, so it opens from file://. The tree is rendered as HTML up front, with <details> for
// everything collapsible, so the page is readable even with scripts off; the small script only
// adds search and keyboard navigation. Every text from the log is escaped: a log holds model
// output and context slices, which may contain markup. Code is highlighted here, by highlight.js
// (which escapes what it is given), so the page carries no highlighter of its own.
import { formatCount } from '../format.js';
import hljs from 'highlight.js/lib/core';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import { escape, seconds, THEME_STYLE } from './html.js';
import type { BlockView, IterationView, RejectedFinalView, RunLog, SubcallView, ToolCallView } from './log-reader.js';

hljs.registerLanguage('javascript', javascript);
hljs.registerLanguage('json', json);

/** Longer texts show this many characters, with a control to expand the rest. */
const PREVIEW_CHARS = 2_000;

interface RunStats {
  iterations: number;
  codeBlocks: number;
  subcalls: number;
  childRuns: number;
  toolCalls: number;
  /** Wall time of the root iterations. */
  durationMs: number;
  /** Per model: calls, tokens and cost (cost only where the log records it). */
  byModel: Record<string, { calls: number; inputTokens: number; outputTokens: number; costUsd: number | null }>;
}

/** Counts over the whole tree, children included. */
export function runStats(log: RunLog): RunStats {
  const stats: RunStats = { iterations: log.iterations.length, codeBlocks: 0, subcalls: 0, childRuns: 0, toolCalls: 0, durationMs: 0, byModel: {} };
  for (const iteration of log.iterations) stats.durationMs += iteration.durationMs ?? 0;
  const visit = (iterations: IterationView[]) => {
    for (const block of iterations.flatMap((iteration) => iteration.blocks)) {
      stats.codeBlocks += 1;
      stats.toolCalls += block.toolCalls.length;
      for (const call of block.subcalls) {
        if (call.child) {
          stats.childRuns += 1;
          visit(call.child);
        } else stats.subcalls += 1;
      }
    }
  };
  visit(log.iterations);
  stats.byModel = usageByModel(log);
  return stats;
}

/** rlm logs end with the whole tree's usage; reference logs only have it per sub-call. */
function usageByModel(log: RunLog): RunStats['byModel'] {
  const recorded = (log.end?.usage as { byModel?: RunStats['byModel'] } | undefined)?.byModel;
  if (recorded && typeof recorded === 'object') return recorded;
  const byModel: RunStats['byModel'] = {};
  for (const call of log.iterations.flatMap((iteration) => iteration.blocks).flatMap((block) => block.subcalls)) {
    for (const [model, usage] of Object.entries(call.usage)) {
      const total = (byModel[model] ??= { calls: 0, inputTokens: 0, outputTokens: 0, costUsd: null });
      total.calls += usage.calls;
      total.inputTokens += usage.inputTokens;
      total.outputTokens += usage.outputTokens;
    }
  }
  return byModel;
}

/** The whole page for one log. `title` names the log (its file name). */
export function renderPage(log: RunLog, title: string): string {
  const stats = runStats(log);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escape(title)} · rlm</title>
<style>${STYLE}</style>
</head>
<body>
<header>
  <h1>rlm run <small>${escape(title)}</small></h1>
  ${renderOutcome(log)}
  ${renderStats(stats, log)}
  <div class="search"><input id="search" type="search" placeholder="Search the run (/)" aria-label="Search the run"> <span id="matches"></span> <span class="hint">j / k: next / previous iteration</span></div>
</header>
<main>
${log.problems.length ? `<section class="problems"><h2>Lines that could not be read</h2><ul>${log.problems.map((problem) => `<li>${escape(problem)}</li>`).join('')}</ul></section>` : ''}
${log.iterations.map((iteration) => renderIteration(iteration, 'root') + renderCompactions(log, iteration.index)).join('\n')}
${log.endsEarly ? '<p class="ends-early" id="ends-early">The log ends early: the run crashed or is still running. Shown is what it had written.</p>' : ''}
</main>
<script>${SCRIPT}</script>
</body>
</html>
`;
}

function renderOutcome(log: RunLog): string {
  const question = log.metadata?.query;
  const end = log.end;
  const status = end ? end.status : 'unfinished';
  const failed = end?.status !== 'completed';
  const finalInLog = lastFinalAnswer(log.iterations);
  const answer = end?.answer ?? end?.partialAnswer ?? finalInLog;
  // Older and reference logs do not say: a completed run with no FINAL in its iterations was forced.
  const forced = end?.status === 'completed' && (end.forced ?? finalInLog === undefined);
  return `<section class="outcome">
  ${question !== undefined ? `<div class="question"><h2>Question</h2>${renderText(question)}</div>` : ''}
  ${log.metadata?.outputSchema ? `<details class="schema" id="output-schema"><summary>Output schema</summary>${renderText(JSON.stringify(log.metadata.outputSchema, null, 2), 'json')}</details>` : ''}
  <div class="answer ${failed ? 'failed' : ''}" id="answer"><h2>${end?.partialAnswer !== undefined && end.answer === undefined ? 'Partial answer' : 'Answer'} <span class="status status-${escape(status)}" id="status">${escape(status)}</span>${forced ? ' <span class="status status-forced" id="forced">forced</span>' : ''}</h2>
  ${answer !== undefined ? renderAnswer(answer, log) : '<p class="none">No answer.</p>'}
  ${end?.error ? `<p class="error">${escape([end.error.name, end.error.code].filter(Boolean).join(' · '))}: ${escape(end.error.message ?? '')}</p>` : ''}</div>
</section>`;
}

/**
 * A run given an output schema answers with JSON text: shown formatted and highlighted. A candidate
 * that is not JSON (the partial answer of a run that could not produce a match) is shown as it is.
 */
function renderAnswer(answer: string, log: RunLog): string {
  if (!log.metadata?.outputSchema) return renderText(answer);
  try {
    return renderText(JSON.stringify(JSON.parse(answer), null, 2), 'json');
  } catch {
    return renderText(answer);
  }
}

function lastFinalAnswer(iterations: IterationView[]): string | undefined {
  for (let index = iterations.length - 1; index >= 0; index -= 1) {
    const iteration = iterations[index]!;
    const answer = iteration.finalAnswer ?? iteration.blocks.findLast((block) => block.finalAnswer !== null)?.finalAnswer;
    if (answer !== null && answer !== undefined) return answer;
  }
  return undefined;
}

function renderStats(stats: RunStats, log: RunLog): string {
  const models = Object.entries(stats.byModel);
  const cell = (label: string, value: string, id: string) => `<div class="stat" id="stat-${id}"><span class="value">${escape(value)}</span><span class="label">${label}</span></div>`;
  return `<section class="stats">
  ${cell('iterations', String(stats.iterations), 'iterations')}
  ${cell('code blocks', String(stats.codeBlocks), 'blocks')}
  ${cell('sub-calls', String(stats.subcalls), 'subcalls')}
  ${cell('child RLMs', String(stats.childRuns), 'children')}
  ${cell('tool calls', String(stats.toolCalls), 'tools')}
  ${cell('wall time', seconds(stats.durationMs), 'time')}
  ${log.metadata?.rootModel ? cell('root model', log.metadata.rootModel, 'model') : ''}
</section>
${
  models.length
    ? `<table class="usage" id="usage"><thead><tr><th>model</th><th>calls</th><th>input tokens</th><th>output tokens</th><th>cost</th></tr></thead><tbody>${models
        .map(([model, usage]) => `<tr><td>${escape(model)}</td><td>${usage.calls}</td><td>${formatCount(usage.inputTokens)}</td><td>${formatCount(usage.outputTokens)}</td><td>${usage.costUsd === null || usage.costUsd === undefined ? 'unknown' : `$${usage.costUsd.toFixed(4)}`}</td></tr>`)
        .join('')}</tbody></table>`
    : ''
}`;
}

function renderIteration(iteration: IterationView, scope: 'root' | 'child'): string {
  const final = iteration.finalAnswer !== null ? ' · <span class="final">FINAL</span>' : '';
  const rejected = iteration.rejectedFinal || iteration.blocks.some((block) => block.rejectedFinals.length > 0) ? ` · ${REJECTED_BADGE}` : '';
  return `<details class="iteration${scope === 'root' ? ' root-iteration' : ''}" open>
<summary>Iteration ${iteration.index} · ${iteration.blocks.length} block${iteration.blocks.length === 1 ? '' : 's'}${iteration.durationMs !== undefined ? ` · ${seconds(iteration.durationMs)}` : ''}${final}${rejected}</summary>
<div class="body">
  <details class="prompt"><summary>Prompt (${iteration.prompt.length} messages)</summary>${renderText(JSON.stringify(iteration.prompt, null, 2))}</details>
  <h3>Model reply</h3>${renderText(replyWithoutBlocks(iteration.response, iteration.blocks), 'reply')}
  ${iteration.blocks.map(renderBlock).join('\n')}
  ${iteration.rejectedFinal ? renderRejectedFinal(iteration.rejectedFinal) : ''}
  ${iteration.finalAnswer !== null ? `<h3>Final answer</h3>${renderText(iteration.finalAnswer)}` : ''}
</div>
</details>`;
}

function renderCompactions(log: RunLog, afterIteration: number): string {
  return log.compactions
    .filter((compaction) => compaction.afterIteration === afterIteration)
    .map((compaction) => {
      const tokens = compaction.tokensBefore !== undefined && compaction.tokensAfter !== undefined ? ` · ${formatCount(compaction.tokensBefore)} → ${formatCount(compaction.tokensAfter)} tokens` : '';
      return `<details class="compaction"><summary>Conversation compacted${tokens}</summary><div class="body"><h4>Summary</h4>${renderText(compaction.summary)}</div></details>`;
    })
    .join('\n');
}

function renderBlock(block: BlockView, index: number): string {
  const variables = Object.entries(block.variables);
  return `<div class="block">
  <h3>Code block ${index + 1}${block.durationMs !== undefined ? ` · ${seconds(block.durationMs)}` : ''}</h3>
  ${renderText(block.code, 'code')}
  ${block.stdout ? `<h4>Output</h4>${renderText(block.stdout)}` : ''}
  ${block.stderr ? `<h4>Errors</h4>${renderText(block.stderr, 'stderr')}` : ''}
  ${block.rejectedFinals.map(renderRejectedFinal).join('\n')}
  ${variables.length ? `<p class="variables">${variables.map(([name, type]) => `<code>${escape(name)}</code>: ${escape(type)}`).join(' · ')}</p>` : ''}
  ${block.toolCalls.map(renderToolCall).join('\n')}
  ${block.subcalls.map(renderSubcall).join('\n')}
</div>`;
}

const REJECTED_BADGE = '<span class="rejected-badge">FINAL rejected</span>';

/** An answer refused because it did not match the output schema: the problems the model was shown, and the answer. */
function renderRejectedFinal(rejected: RejectedFinalView): string {
  return `<div class="rejected-final">
  <h4>${REJECTED_BADGE} does not match the output schema</h4>
  <ul class="rejected-problems">${rejected.problems.map((problem) => `<li><code>${escape(problem)}</code></li>`).join('')}</ul>
  ${renderText(rejected.answer, 'rejected-answer')}
</div>`;
}

function renderSubcall(call: SubcallView): string {
  const kind = call.child ? 'child RLM' : 'sub-call';
  return `<details class="subcall${call.child ? ' child-run' : ''}">
<summary>${kind} · ${escape(call.model ?? 'model')}${call.durationMs !== undefined ? ` · ${seconds(call.durationMs)}` : ''}${call.error ? ' · <span class="error">failed</span>' : ''} · ${escape(oneLine(promptText(call.prompt)))}</summary>
<div class="body">
  <h4>Prompt</h4>${renderText(promptText(call.prompt))}
  <h4>Response</h4>${renderText(call.response)}
  ${call.error ? `<p class="error">${escape(call.error)}</p>` : ''}
  ${call.child ? call.child.map((iteration) => renderIteration(iteration, 'child')).join('\n') : ''}
</div>
</details>`;
}

function renderToolCall(call: ToolCallView): string {
  return `<details class="tool-call">
<summary>tool · ${escape(call.name)}${call.success ? '' : ' · <span class="error">failed</span>'}${call.durationMs !== undefined ? ` · ${seconds(call.durationMs)}` : ''}</summary>
<div class="body">${call.success ? renderText(typeof call.result === 'string' ? call.result : JSON.stringify(call.result, null, 2)) : `<p class="error">${escape(call.error ?? 'failed')}</p>`}</div>
</details>`;
}

/**
 * A reply with each fenced block that ran replaced by a pointer to it: the block is shown right
 * below, highlighted, with its output. Fences that did not run (other languages) stay.
 */
function replyWithoutBlocks(reply: string, blocks: BlockView[]): string {
  let next = 0;
  return reply.replace(FENCED_BLOCK, (fenced: string, body: string | undefined, inline: string | undefined) => {
    const code = body ?? inline?.trim() ?? '';
    const index = blocks.findIndex((block, position) => position >= next && block.code === code);
    if (index === -1) return fenced;
    next = index + 1;
    return `[code block ${index + 1}, shown below]`;
  });
}

/** A fence on lines of its own (its code in group 1), or on one line: ```repl print(1) ``` (group 2). */
const FENCED_BLOCK = /^[ \t]*```[ \t]*[\w-]*(?:[ \t]*\n([\s\S]*?)\n[ \t]*```|[ \t]+(\S.*?)```)[ \t]*$/gm;

/**
 * A sub-call's prompt as text: a string as it is; messages as their text (one message alone, or
 * each under its role), since the log keeps them as `{ role, content }` objects.
 */
function promptText(prompt: unknown): string {
  if (typeof prompt === 'string') return prompt;
  const messages = Array.isArray(prompt) ? prompt.map(messageText) : undefined;
  if (!messages || messages.some((message) => message === undefined)) return JSON.stringify(prompt ?? '', null, 2);
  const texts = messages as { role: string; text: string }[];
  return texts.length === 1 ? texts[0]!.text : texts.map(({ role, text }) => `${role}:\n${text}`).join('\n\n');
}

function messageText(message: unknown): { role: string; text: string } | undefined {
  if (message === null || typeof message !== 'object') return undefined;
  const { role, content } = message as { role?: unknown; content?: unknown };
  if (typeof role !== 'string') return undefined;
  if (typeof content === 'string') return { role, text: content };
  if (content === null || content === undefined) return { role, text: '' };
  if (!Array.isArray(content)) return undefined;
  return { role, text: content.map((part) => (typeof (part as { text?: unknown })?.text === 'string' ? (part as { text: string }).text : '')).join('') };
}

/** A text as preformatted, cut to a preview with an expand control when long; code highlighted. */
function renderText(text: string, kind = 'text'): string {
  const format = kind === 'code' ? highlightCode : kind === 'json' ? highlightJson : escape;
  if (text.length <= PREVIEW_CHARS) return `<pre class="${kind}">${format(text)}</pre>`;
  return `<pre class="${kind}">${format(text.slice(0, PREVIEW_CHARS))}</pre><details class="more"><summary>show all ${formatCount(text.length)} characters</summary><pre class="${kind}">${format(text)}</pre></details>`;
}

function highlightCode(code: string): string {
  return hljs.highlight(code, { language: 'javascript', ignoreIllegals: true }).value;
}

function highlightJson(json: string): string {
  return hljs.highlight(json, { language: 'json', ignoreIllegals: true }).value;
}

function oneLine(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > 100 ? `${line.slice(0, 100)}…` : line;
}

const STYLE = `${THEME_STYLE}
pre { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 8px; white-space: pre-wrap; word-break: break-word; margin: 4px 0; max-height: 480px; overflow: auto; }
pre.code, pre.reply, pre.json, pre.rejected-answer { font-family: ui-monospace, monospace; } pre.stderr, .error { color: var(--bad); }
.answer.failed h2 { color: var(--bad); }
details { border: 1px solid var(--line); border-radius: 6px; margin: 6px 0; padding: 0 8px; }
details > summary { cursor: pointer; padding: 6px 0; } details > .body { padding-bottom: 8px; }
details.iteration.current { outline: 2px solid var(--accent); }
details.more, details.prompt { border: none; padding: 0; }
.child-run { border-left: 3px solid var(--accent); }
.final { color: var(--good); font-weight: 600; }
.rejected-badge { color: var(--bad); border: 1px solid currentColor; border-radius: 10px; padding: 0 8px; font-size: 12px; font-weight: 600; }
.rejected-final { border-left: 3px solid var(--bad); padding-left: 8px; margin: 8px 0; } .rejected-problems { margin: 4px 0; color: var(--bad); }
.hljs-attr { color: #4078f2; } @media (prefers-color-scheme: dark) { .hljs-attr { color: #61afef; } }
.search { margin: 8px 0; } .search input { width: 320px; padding: 4px 8px; } .hint, #matches { color: var(--muted); font-size: 12px; }
.hljs-keyword, .hljs-built_in { color: #a626a4; } .hljs-string, .hljs-regexp { color: #50a14f; } .hljs-number, .hljs-literal { color: #986801; } .hljs-comment { color: var(--muted); font-style: italic; } .hljs-title, .hljs-property { color: #4078f2; }
@media (prefers-color-scheme: dark) { .hljs-keyword, .hljs-built_in { color: #c678dd; } .hljs-string, .hljs-regexp { color: #98c379; } .hljs-number, .hljs-literal { color: #d19a66; } .hljs-title, .hljs-property { color: #61afef; } }
mark { background: var(--mark); color: inherit; }
.ends-early, .problems { color: var(--bad); }
`;

// Search marks matches inside the rendered texts and opens the <details> around them; j/k (or the
// arrow keys with Alt) move between the root iterations.
const SCRIPT = `
(() => {
  const input = document.getElementById('search');
  const counter = document.getElementById('matches');
  const iterations = [...document.querySelectorAll('details.root-iteration')];
  let current = -1;
  const clearMarks = () => {
    for (const mark of document.querySelectorAll('mark')) mark.replaceWith(document.createTextNode(mark.textContent));
    document.querySelector('main').normalize();
  };
  const search = (query) => {
    clearMarks();
    if (!query) { counter.textContent = ''; return; }
    const needle = query.toLowerCase();
    const walker = document.createTreeWalker(document.querySelector('main'), NodeFilter.SHOW_TEXT);
    const hits = [];
    for (let node = walker.nextNode(); node; node = walker.nextNode()) if (node.data.toLowerCase().includes(needle)) hits.push(node);
    let count = 0;
    for (const node of hits) {
      let rest = node;
      for (let at = rest.data.toLowerCase().indexOf(needle); at !== -1; at = rest.data.toLowerCase().indexOf(needle)) {
        const match = rest.splitText(at);
        rest = match.splitText(query.length);
        const mark = document.createElement('mark');
        match.replaceWith(mark);
        mark.appendChild(match);
        count += 1;
        for (let open = mark.parentElement.closest('details'); open; open = open.parentElement.closest('details')) open.open = true;
      }
    }
    counter.textContent = count === 1 ? '1 match' : count + ' matches';
    document.querySelector('mark')?.scrollIntoView({ block: 'center' });
  };
  let timer;
  input.addEventListener('input', () => { clearTimeout(timer); timer = setTimeout(() => search(input.value), 150); });
  const go = (step) => {
    if (!iterations.length) return;
    iterations[current]?.classList.remove('current');
    current = Math.max(0, Math.min(iterations.length - 1, current + step));
    iterations[current].classList.add('current');
    iterations[current].open = true;
    iterations[current].scrollIntoView({ block: 'start' });
  };
  document.addEventListener('keydown', (event) => {
    if (event.target === input) { if (event.key === 'Escape') input.blur(); return; }
    if (event.key === '/') { event.preventDefault(); input.focus(); }
    else if (event.key === 'j') go(1);
    else if (event.key === 'k') go(-1);
  });
})();
`;
