import { describe, expect, it } from 'vitest';
import { ProgressView } from '../../src/cli/progress.js';
import type { ChatResponse, RlmEvent } from '../../src/index.js';

function terminal(columns: number) {
  let text = '';
  return { write: (chunk: string) => void (text += chunk), columns, text: () => text };
}

const base = { runId: 'r', depth: 0 };
const subCall = { model: 'sub', purpose: 'sub' as const, request: { model: 'sub', messages: [] } };
const started = (callId: string): RlmEvent => ({ ...base, ...subCall, type: 'llm-call-start', callId });
const running = (callId: string): RlmEvent => ({ ...base, ...subCall, type: 'llm-call-running', callId });
const ended = (callId: string, more: { purpose?: 'root' | 'sub'; response?: ChatResponse; costUsd?: number | null } = {}): RlmEvent => ({
  ...base,
  ...subCall,
  type: 'llm-call-end',
  callId,
  durationMs: 1,
  ...more,
});

describe('the live status line', () => {
  it('tells queued sub-calls from running ones', () => {
    const output = terminal(200);
    const view = new ProgressView('live', output);
    view.handle({ ...base, type: 'iteration-start', iteration: 1, maxIterations: 30 });
    for (const id of ['a', 'b', 'c']) view.handle(started(id));
    view.handle(running('a'));
    view.handle(ended('c')); // failed in the queue
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
    const reply: ChatResponse = { content: 'x', toolCalls: [], usage: { inputTokens: 10, outputTokens: 5 }, finishReason: 'stop' };
    view.handle(ended('r', { purpose: 'root', response: reply, costUsd: null }));
    view.stop();
    expect(output.text()).toContain('15 tokens · cost unknown (no prices for these models)');
    expect(output.text()).not.toContain('$0.0000');
  });
});
