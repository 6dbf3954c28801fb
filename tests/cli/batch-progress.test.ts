import { describe, expect, it } from 'vitest';
import { BatchProgress } from '../../src/cli/batch-progress.js';
import type { TaskRecord } from '../../src/index.js';

const record = (id: string, status: 'completed' | 'failed'): TaskRecord => ({
  id,
  status,
  answer: status === 'completed' ? 'yes' : null,
  ...(status === 'failed' && { error: { code: 'model_error', message: 'refused' } }),
  usage: { calls: 2, input_tokens: 1500, output_tokens: 500, by_model: {} },
  cost_usd: 0.25,
  iterations: 2,
  forced: false,
  duration_ms: 1200,
  attempts: 1,
});

function output() {
  const written: string[] = [];
  return { written, write: (text: string) => void written.push(text), columns: 200 };
}

describe('BatchProgress', () => {
  it('live: redraws one line with the bar, done / failed / running / total, times, spend and tokens', () => {
    const out = output();
    const progress = new BatchProgress('live', out, 4);
    progress.handle({ type: 'task-start', id: 'a' });
    progress.handle({ type: 'task-start', id: 'b' });
    progress.handle({ type: 'task-end', record: record('a', 'completed') });
    progress.handle({ type: 'task-end', record: record('b', 'failed') });
    progress.handle({ type: 'task-start', id: 'c' });
    progress.stop();
    const last = out.written.filter((text) => text.length > 8).at(-1)!;
    expect(last).toMatch(/^\r\x1b\[2K\[#{10}-{10}\] 2\/4 done · 1 failed · 1 running · \d+s elapsed · ETA \d+s · \$0\.5000 · 4\.0k tokens$/);
    expect(out.written.at(-1)).toBe('\r\x1b[2K');
  });

  it('lines: one line per finished task; quiet: nothing', () => {
    const lines = output();
    const progress = new BatchProgress('lines', lines, 2);
    progress.handle({ type: 'task-start', id: 'a' });
    progress.handle({ type: 'task-end', record: record('a', 'failed') });
    expect(lines.written).toEqual(['rlm: 1/2 a failed (model_error: refused) in 1.2 s, $0.2500\n']);
    const quiet = output();
    const silent = new BatchProgress('quiet', quiet, 2);
    silent.handle({ type: 'task-end', record: record('a', 'completed') });
    expect(quiet.written).toEqual([]);
  });
});
