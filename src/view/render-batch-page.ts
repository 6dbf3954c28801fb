// Renders a batch's results (batch-results.ts) as one self-contained HTML page, as render-page.ts
// does for one run: inline styles, script and SVG charts, no network. The summary, the charts and
// the task table are HTML up front, so the page reads with scripts off; the script only sorts and
// filters the table. Every text from the results file (ids, answers, errors) is escaped: answers
// are model output.
import { formatCount } from '../format.js';
import type { BatchResults, BatchSummary, ModelTokens, TaskResult } from './batch-results.js';
import { summarizeBatch } from './batch-results.js';
import { escape, seconds, THEME_STYLE } from './html.js';

/** Answers in the table are cut to this many characters; the cell's tooltip holds more. */
const EXCERPT_CHARS = 160;
const TOOLTIP_CHARS = 500;
const HISTOGRAM_BINS = 10;

export interface BatchPageOptions {
  /** Names the results file (its file name). */
  title: string;
  /** Where a task's trajectory page is, relative to this page; undefined for a task without one. */
  trajectoryHref: (task: TaskResult) => string | undefined;
}

export function renderBatchPage(results: BatchResults, options: BatchPageOptions): string {
  const summary = summarizeBatch(results.tasks);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escape(options.title)} · rlm batch</title>
<style>${STYLE}</style>
</head>
<body>
<header>
  <h1>rlm batch <small>${escape(options.title)}</small></h1>
  ${renderSummary(summary)}
  ${renderBreakdowns(summary)}
</header>
<main>
${renderNotes(results)}
${renderCharts(results.tasks)}
${renderTable(results.tasks, summary, options)}
</main>
<script>${SCRIPT}</script>
</body>
</html>
`;
}

function renderSummary(summary: BatchSummary): string {
  const cell = (label: string, value: string, id: string) => `<div class="stat" id="stat-${id}"><span class="value">${escape(value)}</span><span class="label">${escape(label)}</span></div>`;
  const statuses = Object.entries(summary.byStatus).map(([status, count]) => cell(status, String(count), `status-${status.replace(/[^\w-]/g, '_')}`));
  const cost = summary.cost;
  const costNote = summary.costUnknown ? ` (${summary.costUnknown} unknown)` : '';
  return `<section class="stats" id="summary">
  ${cell('tasks', String(summary.total), 'tasks')}
  ${statuses.join('\n  ')}
  ${summary.accuracy !== undefined ? cell(`accuracy (${summary.scored} scored)`, percent(summary.accuracy), 'accuracy') : ''}
  ${cost.count ? cell(`cost total${costNote}`, usd(cost.total), 'cost-total') : cell('cost', 'unknown', 'cost-total')}
  ${cost.count ? cell('cost mean · p50 · p95', [cost.mean, cost.p50, cost.p95].map(usd).join(' · '), 'cost-spread') : ''}
  ${summary.duration.count ? cell('duration p50 · p95', `${seconds(summary.duration.p50!)} · ${seconds(summary.duration.p95!)}`, 'duration') : ''}
  ${summary.iterations.count ? cell('iterations mean · total', `${round(summary.iterations.mean!)} · ${summary.iterations.total}`, 'iterations') : ''}
  ${summary.forced ? cell('forced answers', String(summary.forced), 'forced') : ''}
</section>`;
}

function renderBreakdowns(summary: BatchSummary): string {
  const failures = Object.entries(summary.failuresByCode).sort((a, b) => b[1] - a[1]);
  const models = Object.entries(summary.tokensByModel);
  const failureTable = failures.length
    ? `<table class="usage" id="failures"><thead><tr><th>failure code</th><th>tasks</th></tr></thead><tbody>${failures.map(([code, count]) => `<tr><td>${escape(code)}</td><td>${count}</td></tr>`).join('')}</tbody></table>`
    : '';
  const modelRow = ([model, usage]: [string, ModelTokens]) =>
    `<tr><td>${escape(model)}</td><td>${usage.calls}</td><td>${formatCount(usage.inputTokens)}</td><td>${formatCount(usage.outputTokens)}</td><td>${usage.costUsd === null ? 'unknown' : usd(usage.costUsd)}</td></tr>`;
  const usageTable = models.length
    ? `<table class="usage" id="usage"><thead><tr><th>model</th><th>calls</th><th>input tokens</th><th>output tokens</th><th>cost</th></tr></thead><tbody>${models.map(modelRow).join('')}</tbody></table>`
    : '';
  return `<div class="breakdowns">${failureTable}${usageTable}</div>`;
}

function renderNotes(results: BatchResults): string {
  const problems = results.problems.length
    ? `<section class="problems"><h2>Lines that could not be read</h2><ul>${results.problems.map((problem) => `<li>${escape(problem)}</li>`).join('')}</ul></section>`
    : '';
  const torn = results.tornLastLine ? '<p class="problems" id="torn-line">The last line was cut off (the batch stopped while writing it, or is still writing): that line is left out.</p>' : '';
  return problems + torn;
}

function renderCharts(tasks: TaskResult[]): string {
  const values = (pick: (task: TaskResult) => number | null | undefined) => tasks.map(pick).filter((value): value is number => typeof value === 'number');
  const charts = [
    // Scores are fractions: on 0 to 1, all-correct and all-wrong batches do not look alike.
    histogram('score', 'Score', values((task) => task.score), percent, [0, 1]),
    histogram('cost', 'Cost', values((task) => task.costUsd), usd),
    histogram('duration', 'Duration', values((task) => task.durationMs), seconds),
  ].filter(Boolean);
  return charts.length ? `<section class="charts">${charts.join('\n')}</section>` : '';
}

/** A histogram as inline SVG: equal-width bins over `domain` widened to hold every value (default: from the lowest value to the highest). */
export function histogram(id: string, label: string, values: number[], format: (value: number) => string, domain?: [number, number]): string {
  if (values.length === 0) return '';
  // reduce, not Math.min(...values): a spread of a few hundred thousand values overflows the stack.
  const low = values.reduce((lowest, value) => Math.min(lowest, value), domain?.[0] ?? Infinity);
  const high = values.reduce((highest, value) => Math.max(highest, value), domain?.[1] ?? -Infinity);
  const bins = high === low ? 1 : HISTOGRAM_BINS;
  const counts = new Array<number>(bins).fill(0);
  for (const value of values) counts[Math.min(bins - 1, Math.floor(((value - low) / (high - low || 1)) * bins))]! += 1;
  const most = Math.max(...counts);
  const [width, height, barWidth] = [300, 100, 300 / bins];
  const bars = counts.map((count, index) => {
    const barHeight = (count / most) * height;
    const from = low + ((high - low) * index) / bins;
    const to = low + ((high - low) * (index + 1)) / bins;
    return `<rect x="${(index * barWidth + 1).toFixed(1)}" y="${(height - barHeight).toFixed(1)}" width="${(barWidth - 2).toFixed(1)}" height="${barHeight.toFixed(1)}"><title>${escape(`${format(from)} – ${format(to)}: ${count} task${count === 1 ? '' : 's'}`)}</title></rect>`;
  });
  return `<figure class="chart" id="chart-${id}"><figcaption>${escape(label)} <span class="hint">${values.length} task${values.length === 1 ? '' : 's'}, at most ${most} in a bar</span></figcaption>
<svg viewBox="0 0 ${width} ${height + 16}" width="${width}" height="${height + 16}" role="img" aria-label="${escape(`${label} distribution`)}">${bars.join('')}
<line x1="0" y1="${height + 0.5}" x2="${width}" y2="${height + 0.5}"/><text x="0" y="${height + 13}">${escape(format(low))}</text><text x="${width}" y="${height + 13}" text-anchor="end">${escape(format(high))}</text></svg></figure>`;
}

const COLUMNS: { label: string; type: 'text' | 'number' }[] = [
  { label: 'id', type: 'text' },
  { label: 'status', type: 'text' },
  { label: 'score', type: 'number' },
  { label: 'cost', type: 'number' },
  { label: 'duration', type: 'number' },
  { label: 'iterations', type: 'number' },
  { label: 'answer', type: 'text' },
  { label: 'error', type: 'text' },
];

function renderTable(tasks: TaskResult[], summary: BatchSummary, options: BatchPageOptions): string {
  const statusOptions = Object.keys(summary.byStatus).map((status) => `<option value="${escape(status)}">${escape(status)}</option>`);
  const head = COLUMNS.map((column) => `<th data-type="${column.type}" aria-sort="none"><button type="button">${column.label}</button></th>`).join('');
  return `<section class="tasks">
<h2>Tasks</h2>
<div class="filters"><input id="filter" type="search" placeholder="Filter by id, answer or error (/)" aria-label="Filter tasks">
<select id="status-filter" aria-label="Status"><option value="">every status</option>${statusOptions.join('')}</select>
<span id="shown" class="hint">${tasks.length} of ${tasks.length} tasks</span></div>
<table id="tasks"><thead><tr>${head}</tr></thead>
<tbody>
${tasks.map((task) => renderRow(task, options.trajectoryHref(task))).join('\n')}
</tbody></table>
</section>`;
}

function renderRow(task: TaskResult, href: string | undefined): string {
  const number = (value: number | null | undefined, shown: (value: number) => string) =>
    value === null || value === undefined ? '<td data-value="">–</td>' : `<td data-value="${value}">${escape(shown(value))}</td>`;
  const id = href ? `<a href="${escape(href)}">${escape(task.id)}</a>` : escape(task.id);
  const answer = task.answer ?? task.partialAnswer;
  const answerCell =
    answer === undefined
      ? '<td class="answer"></td>'
      : `<td class="answer" title="${escape(answer.slice(0, TOOLTIP_CHARS))}">${task.answer === undefined ? '<span class="hint">partial:</span> ' : ''}${escape(excerpt(answer))}</td>`;
  const error = task.error ? `<td class="error"><code>${escape(task.error.code)}</code> ${escape(excerpt(task.error.message))}</td>` : '<td></td>';
  return `<tr data-status="${escape(task.status)}"><td class="id">${id}</td><td><span class="status status-${escape(task.status)}">${escape(task.status)}</span>${task.forced ? ' <span class="status status-forced">forced</span>' : ''}</td>${number(task.score, round)}${number(task.costUsd, usd)}${number(task.durationMs, seconds)}${number(task.iterations, String)}${answerCell}${error}</tr>`;
}

function excerpt(text: string): string {
  // Only the start is shown: folding the whitespace of a whole long answer would be wasted work.
  const line = text.slice(0, EXCERPT_CHARS * 4).replace(/\s+/g, ' ').trim();
  return line.length > EXCERPT_CHARS || text.length > EXCERPT_CHARS * 4 ? `${line.slice(0, EXCERPT_CHARS)}…` : line;
}

function usd(value: number | undefined): string {
  if (value === undefined) return '–';
  return value !== 0 && Math.abs(value) < 0.01 ? `$${value.toFixed(5)}` : `$${value.toFixed(2)}`;
}

function percent(value: number): string {
  return `${(value * 100).toFixed(1)}%`;
}

function round(value: number): string {
  return String(Math.round(value * 100) / 100);
}

const STYLE = `${THEME_STYLE}
.breakdowns { display: flex; flex-wrap: wrap; gap: 16px; align-items: flex-start; }
.charts { display: flex; flex-wrap: wrap; gap: 40px; }
.chart { margin: 8px 0; } .chart figcaption { font-weight: 600; margin-bottom: 4px; }
.chart rect { fill: var(--accent); } .chart text { fill: var(--muted); font-size: 10px; } .chart line { stroke: var(--line); }
.filters { margin: 8px 0; display: flex; gap: 8px; align-items: center; } .filters input { width: 320px; padding: 4px 8px; }
.hint { color: var(--muted); font-size: 12px; font-weight: normal; }
table#tasks { border-collapse: collapse; width: 100%; }
table#tasks th, table#tasks td { border-bottom: 1px solid var(--line); padding: 4px 6px; text-align: left; vertical-align: top; }
table#tasks th button { font: inherit; font-weight: 600; background: none; border: none; color: inherit; cursor: pointer; padding: 0; }
table#tasks th[aria-sort="ascending"] button::after { content: " ▲"; } table#tasks th[aria-sort="descending"] button::after { content: " ▼"; }
table#tasks td[data-value], table#tasks th[data-type="number"] { text-align: right; white-space: nowrap; }
td.answer { max-width: 420px; word-break: break-word; } td.id { word-break: break-all; }
.status-failed, .error, .problems { color: var(--bad); }
a { color: var(--accent); }
`;

// Sorting compares the cells' data-value (numbers; empty ones last) or their text; filtering hides
// the rows whose text does not hold the filter, or whose status is not the one chosen.
const SCRIPT = `
(() => {
  const table = document.getElementById('tasks');
  const body = table.tBodies[0];
  const rows = [...body.rows];
  const filter = document.getElementById('filter');
  const status = document.getElementById('status-filter');
  const shown = document.getElementById('shown');
  const headers = [...table.tHead.rows[0].cells];
  const key = (row, column, numeric) => {
    const cell = row.cells[column];
    if (!numeric) return cell.textContent.trim().toLowerCase();
    return cell.dataset.value === '' ? null : Number(cell.dataset.value);
  };
  const sortBy = (column) => {
    const header = headers[column];
    const descending = header.getAttribute('aria-sort') === 'ascending';
    const numeric = header.dataset.type === 'number';
    for (const other of headers) other.setAttribute('aria-sort', 'none');
    header.setAttribute('aria-sort', descending ? 'descending' : 'ascending');
    const sorted = [...body.rows].sort((a, b) => {
      const [x, y] = [key(a, column, numeric), key(b, column, numeric)];
      if (x === null || y === null) return x === y ? 0 : x === null ? 1 : -1;
      const order = numeric ? x - y : x.localeCompare(y, undefined, { numeric: true });
      return descending ? -order : order;
    });
    body.append(...sorted);
  };
  headers.forEach((header, column) => header.querySelector('button').addEventListener('click', () => sortBy(column)));
  const apply = () => {
    const needle = filter.value.trim().toLowerCase();
    let count = 0;
    for (const row of rows) {
      row.hidden = (status.value !== '' && row.dataset.status !== status.value) || (needle !== '' && !row.textContent.toLowerCase().includes(needle));
      if (!row.hidden) count += 1;
    }
    shown.textContent = count + ' of ' + rows.length + ' tasks';
  };
  filter.addEventListener('input', apply);
  status.addEventListener('change', apply);
  document.addEventListener('keydown', (event) => {
    if (event.target === filter) { if (event.key === 'Escape') filter.blur(); return; }
    if (event.key === '/' && event.target.tagName !== 'SELECT') { event.preventDefault(); filter.focus(); }
  });
})();
`;
