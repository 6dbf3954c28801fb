import { describe, expect, it } from 'vitest';
import { isBatchResults, readBatchResults, summarizeBatch } from '../../src/view/batch-results.js';
import { openAiResultLine, resultLine, taskUsage } from './helpers.js';

describe('isBatchResults', () => {
  it('tells a results file from a trajectory by its first JSON object line', () => {
    expect(isBatchResults(resultLine({ id: 'a' }))).toBe(true);
    expect(isBatchResults(openAiResultLine({ id: 'a' }))).toBe(true);
    expect(isBatchResults(`\nnot json\n${resultLine({ id: 7 })}`)).toBe(true);
    expect(isBatchResults(`${JSON.stringify({ type: 'metadata', query: 'q' })}\n${resultLine({ id: 'a' })}`)).toBe(false);
    expect(isBatchResults(JSON.stringify({ type: 'iteration', iteration: 1, id: 'x', status: 'y' }))).toBe(false);
    expect(isBatchResults('hello\nworld\n')).toBe(false);
    expect(isBatchResults('')).toBe(false);
  });
});

describe('readBatchResults', () => {
  it('takes the last line per id, keeping the place where the id first appeared', () => {
    const text = [
      resultLine({ id: 'a', status: 'failed', answer: undefined, error: { code: 'max_budget', message: 'spent' } }),
      resultLine({ id: 'b', answer: 'bee' }),
      resultLine({ id: 'a', answer: 'second try', attempts: 2 }),
    ].join('');
    const { tasks, problems, tornLastLine } = readBatchResults(text);
    expect(tasks.map((task) => [task.id, task.status, task.answer])).toEqual([
      ['a', 'completed', 'second try'],
      ['b', 'completed', 'bee'],
    ]);
    expect(tasks[0]).toMatchObject({ attempts: 2, error: undefined, shape: 'rlm' });
    expect(problems).toEqual([]);
    expect(tornLastLine).toBe(false);
  });

  it('leaves out a torn last line, and lists other unreadable lines as problems', () => {
    const whole = resultLine({ id: 'a' }) + resultLine({ id: 'b' });
    const torn = `${whole}${resultLine({ id: 'c' }).slice(0, 25)}`;
    const read = readBatchResults(torn);
    expect(read.tasks.map((task) => task.id)).toEqual(['a', 'b']);
    expect(read.tornLastLine).toBe(true);
    expect(read.problems).toEqual([]);
    // A bad line that the writer finished (followed by a newline, or by more lines) is not a torn one.
    const bad = readBatchResults(`${resultLine({ id: 'a' })}{"id": "half\n[1,2]\n${JSON.stringify({ status: 'completed' })}\n`);
    expect(bad.tasks.map((task) => task.id)).toEqual(['a']);
    expect(bad.tornLastLine).toBe(false);
    expect(bad.problems).toEqual(['line 2 is not a JSON object', 'line 3 is not a JSON object', 'line 4 has no task id']);
  });

  it('reads the fields of rlm result lines, with scores from booleans and numbers', () => {
    const usage = taskUsage({ root: { calls: 3, input_tokens: 100, output_tokens: 20, cost_usd: 0.002 } });
    const [task, yes, no] = readBatchResults(
      resultLine({ id: 'n1', score: 0.5, usage, cost_usd: 0.002, iterations: 3, forced: true, duration_ms: 1500, log_path: 'runs/n1.jsonl' }) + resultLine({ id: 'n2', score: true }) + resultLine({ id: 'n3', score: false }),
    ).tasks;
    expect(task).toMatchObject({ id: 'n1', score: 0.5, costUsd: 0.002, iterations: 3, forced: true, durationMs: 1500, logPath: 'runs/n1.jsonl', usageByModel: { root: { calls: 3, inputTokens: 100, outputTokens: 20, costUsd: 0.002 } } });
    expect([yes!.score, no!.score]).toEqual([1, 0]);
  });

  it('reads OpenAI Batch output lines: the record rlm batch adds, else the completion and its usage, and failures', () => {
    const text =
      openAiResultLine({ id: 'req-1', answer: 'forty-two', forced: true, record: { cost_usd: 0.01, iterations: 4, score: 1, log_path: 'runs/r1.jsonl' } }) +
      openAiResultLine({ id: 'req-0', answer: 'from elsewhere' }) +
      JSON.stringify({ id: 'batch_req_2', custom_id: 'req-2', response: { status_code: 500, request_id: 'r2', body: { error: { message: 'The run failed: budget spent', type: 'server_error', code: 'max_budget' } } }, error: null }) +
      '\n' +
      JSON.stringify({ id: 'batch_req_3', custom_id: 'req-3', response: null, error: { code: 'batch_expired', message: 'not run' } }) +
      '\n';
    const [done, foreign, failed, expired] = readBatchResults(text).tasks;
    expect(done).toMatchObject({ id: 'req-1', status: 'completed', answer: 'forty-two', costUsd: 0.01, iterations: 4, forced: true, score: 1, logPath: 'runs/r1.jsonl', shape: 'openai' });
    expect(done!.usageByModel).toEqual({ root: { calls: 1, inputTokens: 50, outputTokens: 5, costUsd: 0.001 } });
    expect(foreign).toMatchObject({ id: 'req-0', status: 'completed', answer: 'from elsewhere', costUsd: null, shape: 'openai' });
    expect(foreign!.usageByModel).toEqual({ 'rlm-model': { calls: 1, inputTokens: 120, outputTokens: 8, costUsd: null } });
    expect(failed).toMatchObject({ id: 'req-2', status: 'failed', error: { code: 'max_budget', message: 'The run failed: budget spent' } });
    expect(expired).toMatchObject({ id: 'req-3', status: 'failed', error: { code: 'batch_expired', message: 'not run' } });
  });

  it('keeps a model named __proto__ as a model, not as a prototype', () => {
    const usage = { by_model: JSON.parse('{"__proto__": {"calls": 1, "input_tokens": 5, "output_tokens": 1, "cost_usd": null}}') };
    const [task] = readBatchResults(resultLine({ id: 'p', usage })).tasks;
    expect(Object.keys(task!.usageByModel)).toEqual(['__proto__']);
    expect(Object.getPrototypeOf(task!.usageByModel)).toBe(Object.prototype);
    expect(Object.keys(summarizeBatch([task!]).tokensByModel)).toEqual(['__proto__']);
  });
});

describe('summarizeBatch', () => {
  it('counts by status and failure code, and spreads cost, duration and iterations', () => {
    const lines = Array.from({ length: 20 }, (_, index) =>
      resultLine({
        id: `t${index}`,
        status: index < 17 ? 'completed' : 'failed',
        error: index < 17 ? undefined : { code: index === 19 ? 'timeout' : 'max_budget', message: 'x' },
        cost_usd: (index + 1) / 100,
        duration_ms: (index + 1) * 1000,
        iterations: index % 3 + 1,
        score: index < 10 ? 1 : index < 17 ? 0 : undefined,
      }),
    );
    const summary = summarizeBatch(readBatchResults(lines.join('')).tasks);
    expect(summary).toMatchObject({ total: 20, byStatus: { completed: 17, failed: 3 }, failuresByCode: { max_budget: 2, timeout: 1 }, scored: 17, costUnknown: 0 });
    expect(summary.accuracy).toBeCloseTo(10 / 17);
    expect(summary.cost.total).toBeCloseTo(2.1);
    expect(summary.cost.mean).toBeCloseTo(0.105);
    // Nearest rank: the 10th and the 19th of 20.
    expect([summary.cost.p50, summary.cost.p95]).toEqual([0.1, 0.19]);
    expect([summary.duration.p50, summary.duration.p95]).toEqual([10_000, 19_000]);
    expect(summary.iterations.total).toBe(7 * 1 + 7 * 2 + 6 * 3);
  });

  it('adds tokens per model over the tasks, and leaves a cost unknown once a task has no price for it', () => {
    const byModel = (costUsd: number | null) => taskUsage({ root: { calls: 2, input_tokens: 10, output_tokens: 3, cost_usd: costUsd }, sub: { calls: 1, input_tokens: 4, output_tokens: 1, cost_usd: 0.001 } });
    const tasks = readBatchResults(resultLine({ id: 'a', usage: byModel(0.01), cost_usd: 0.011 }) + resultLine({ id: 'b', usage: byModel(null), cost_usd: null })).tasks;
    const summary = summarizeBatch(tasks);
    expect(summary.tokensByModel).toEqual({ root: { calls: 4, inputTokens: 20, outputTokens: 6, costUsd: null }, sub: { calls: 2, inputTokens: 8, outputTokens: 2, costUsd: 0.002 } });
    expect(summary.costUnknown).toBe(1);
    expect(summary.cost.count).toBe(1);
    expect(summarizeBatch([]).accuracy).toBeUndefined();
  });
});
