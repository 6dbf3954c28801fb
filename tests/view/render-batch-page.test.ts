import { describe, expect, it } from 'vitest';
import { readBatchResults } from '../../src/view/batch-results.js';
import { histogram, renderBatchPage } from '../../src/view/render-batch-page.js';
import { resultLine, taskUsage } from './helpers.js';

const hostile = '<script>alert(1)</script><img src=x onerror="alert(2)">';
const noLinks = { title: 'results.jsonl', trajectoryHref: () => undefined };
const withoutTags = (html: string) => html.replace(/<[^>]*>/g, '');

describe('renderBatchPage', () => {
  it('escapes every text of the results: ids, answers, errors, statuses, model names and the title', () => {
    const usage = taskUsage({ [hostile]: { calls: 1, input_tokens: 1, output_tokens: 1, cost_usd: null } });
    const text = resultLine({ id: hostile, answer: hostile, usage }) + resultLine({ id: 'b', status: hostile, error: { code: hostile, message: hostile } });
    const page = renderBatchPage(readBatchResults(text), { title: hostile, trajectoryHref: (task) => (task.id === 'b' ? `x" onclick="alert(3)` : undefined) });
    expect(page).not.toContain('<script>alert');
    expect(page).not.toContain('<img');
    expect(page).not.toContain('" onerror=');
    expect(page).not.toContain('" onclick=');
    expect(page).toContain('&#60;script&#62;alert(1)&#60;/script&#62;');
    // The only scripts are the page's own, and it fetches nothing.
    expect(page.match(/<script>/g)).toHaveLength(1);
    expect(page).not.toMatch(/<(script|link|img)[^>]+(src|href)=/);
  });

  it('sums the batch up: tasks by status, failures by code, accuracy, cost and duration spreads, tokens per model', () => {
    const text = [
      resultLine({ id: 'a', score: 1, cost_usd: 0.5, duration_ms: 2000, iterations: 2 }),
      resultLine({ id: 'b', score: 0, cost_usd: 0.25, duration_ms: 4000, iterations: 4 }),
      resultLine({ id: 'c', status: 'failed', answer: undefined, error: { code: 'max_budget', message: 'spent' }, cost_usd: null, usage: undefined }),
    ].join('');
    const page = renderBatchPage(readBatchResults(text), noLinks);
    const stat = (id: string) => withoutTags(page.match(new RegExp(`<div class="stat" id="stat-${id}">.*?</div>`))?.[0] ?? '');
    expect(stat('tasks')).toBe('3tasks');
    expect(stat('status-completed')).toBe('2completed');
    expect(stat('status-failed')).toBe('1failed');
    expect(stat('accuracy')).toBe('50.0%accuracy (2 scored)');
    expect(stat('cost-total')).toBe('$0.75cost total (1 unknown)');
    expect(stat('cost-spread')).toBe('$0.38 · $0.25 · $0.50cost mean · p50 · p95');
    expect(stat('duration')).toBe('2.00 s · 4.00 s' + 'duration p50 · p95');
    expect(stat('iterations')).toBe('2.33 · 7iterations mean · total');
    expect(page).toMatch(/<table class="usage" id="failures">.*<td>max_budget<\/td><td>1<\/td>/);
    expect(page).toMatch(/<table class="usage" id="usage">.*<td>root<\/td><td>2<\/td><td>100<\/td><td>10<\/td><td>\$0\.00200<\/td>/);
  });

  it('charts score, cost and duration as inline SVG histograms, and leaves out a chart with nothing to show', () => {
    const text = Array.from({ length: 10 }, (_, index) => resultLine({ id: `t${index}`, cost_usd: index / 10, duration_ms: 1000, score: undefined })).join('');
    const page = renderBatchPage(readBatchResults(text), noLinks);
    expect(page).not.toContain('id="chart-score"');
    const cost = page.slice(page.indexOf('id="chart-cost"'), page.indexOf('</figure>', page.indexOf('id="chart-cost"')));
    expect(cost.match(/<rect /g)).toHaveLength(10);
    expect(cost).toContain('<title>$0.81 – $0.90: 1 task</title>');
    // One duration for all: one bar.
    const duration = page.slice(page.indexOf('id="chart-duration"'), page.indexOf('</figure>', page.indexOf('id="chart-duration"')));
    expect(duration.match(/<rect /g)).toHaveLength(1);
    expect(duration).toContain('10 tasks');
    // Scores are charted on 0 to 1 however they fall: all correct is one bar at the right end.
    const correct = renderBatchPage(readBatchResults(resultLine({ id: 'a', score: 1 }) + resultLine({ id: 'b', score: 1 })), noLinks);
    const score = correct.slice(correct.indexOf('id="chart-score"'), correct.indexOf('</figure>', correct.indexOf('id="chart-score"')));
    expect(score.match(/<rect /g)).toHaveLength(10);
    expect(score).toContain('<title>90.0% – 100.0%: 2 tasks</title>');
    expect(score).toContain('<title>0.0% – 10.0%: 0 tasks</title>');
  });

  it('charts a batch of hundreds of thousands of tasks without overflowing the stack', () => {
    const svg = histogram('cost', 'Cost', Array.from({ length: 300_000 }, (_, index) => index), String);
    expect(svg.match(/<rect /g)).toHaveLength(10);
    expect(svg).toContain('<title>269999.1 – 299999: 30000 tasks</title>');
  });

  it('lists every task in a row with its numbers as sort values, linking the id to its trajectory where there is one', () => {
    const text = resultLine({ id: 'linked', log_path: 'runs/a.jsonl', score: 1, cost_usd: 0.125 }) + resultLine({ id: 'plain', answer: 'x'.repeat(500), partial_answer: undefined, forced: true });
    const page = renderBatchPage(readBatchResults(text), { title: 'r', trajectoryHref: (task) => (task.logPath ? 'r-trajectories/a.html' : undefined) });
    const rows = page.match(/<tr data-status=.*<\/tr>/g)!;
    expect(rows).toHaveLength(2);
    expect(rows[0]).toContain('<td class="id"><a href="r-trajectories/a.html">linked</a></td>');
    expect(rows[0]).toContain('<td data-value="1">1</td><td data-value="0.125">$0.13</td>');
    expect(rows[1]).toContain('<td class="id">plain</td>');
    expect(rows[1]).toContain('status-forced');
    // The answer is cut in the cell; its start is in the tooltip.
    expect(rows[1]).toContain(`>${'x'.repeat(160)}…</td>`);
    expect(page).toContain('<span id="shown" class="hint">2 of 2 tasks</span>');
    // A long answer whose start is all whitespace is still marked as cut.
    const spaced = renderBatchPage(readBatchResults(resultLine({ id: 's', answer: `${' '.repeat(1000)}tail` })), noLinks);
    expect(spaced).toMatch(/<td class="answer" title="[^"]*">…<\/td>/);
  });

  it('says when lines could not be read or the last one was cut off', () => {
    const page = renderBatchPage(readBatchResults(`not json\n${resultLine({ id: 'a' })}{"id":`), noLinks);
    expect(page).toContain('<li>line 1 is not a JSON object</li>');
    expect(page).toContain('id="torn-line"');
  });
});
