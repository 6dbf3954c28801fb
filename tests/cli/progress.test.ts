import { describe, expect, it } from 'vitest';
import { ProgressView } from '../../src/cli/progress.js';
import type { RlmEvent } from '../../src/index.js';

function terminal(columns: number) {
  let text = '';
  return { write: (chunk: string) => void (text += chunk), columns, text: () => text };
}

const base = { runId: 'r', depth: 0 };
const call = (type: 'llm-call-start' | 'llm-call-running' | 'llm-call-end', callId: string) =>
  ({ ...base, type, callId, model: 'sub', purpose: 'sub', request: { model: 'sub', messages: [] }, durationMs: 1 }) as unknown as RlmEvent;

describe('the live status line', () => {
  it('tells queued sub-calls from running ones', () => {
    const output = terminal(200);
    const view = new ProgressView('live', output);
    view.handle({ ...base, type: 'iteration-start', iteration: 1, maxIterations: 30 });
    for (const id of ['a', 'b', 'c']) view.handle(call('llm-call-start', id));
    view.handle(call('llm-call-running', 'a'));
    view.handle(call('llm-call-end', 'c')); // failed in the queue
    view.stop();
    expect(output.text()).toContain('sub-calls 1 running, 1 queued, 1 done');
  });

  it('takes a terminal that reports 0 columns as unknown, not as no room', () => {
    const output = terminal(0);
    const view = new ProgressView('live', output);
    view.handle({ ...base, type: 'iteration-start', iteration: 1, maxIterations: 30 });
    view.stop();
    expect(output.text()).toContain('iteration 1/30 · sub-calls 0 running, 0 done');
  });

  it('shows no cost before the first reply, then says when it is unknown', () => {
    const output = terminal(200);
    const view = new ProgressView('live', output);
    view.handle({ ...base, type: 'iteration-start', iteration: 1, maxIterations: 30 });
    expect(output.text()).toContain('iteration 1/30');
    expect(output.text()).not.toContain('$');
    const reply = { content: 'x', usage: { inputTokens: 10, outputTokens: 5 } };
    view.handle({ ...(call('llm-call-end', 'r') as object), purpose: 'root', response: reply, costUsd: null } as unknown as RlmEvent);
    view.stop();
    expect(output.text()).toContain('15 tokens · cost unknown (no prices for these models)');
    expect(output.text()).not.toContain('$0.0000');
  });
});
