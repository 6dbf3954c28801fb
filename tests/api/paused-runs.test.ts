import { describe, expect, it } from 'vitest';
import { ActiveRun, type RunStep } from '../../src/api/active-run.js';
import { ApiError } from '../../src/api/errors.js';
import { PausedRuns, type ExpiryTimer } from '../../src/api/paused-runs.js';
import { RLM, type ToolSpec } from '../../src/index.js';
import { ScriptedModel } from '../../src/testing.js';
import { thrownBy } from '../rejection.js';
import { repl } from '../repl.js';

const lookup: ToolSpec = { type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: {} } } };
const TTL_MS = 60_000;

/** Timers that fire only when the test moves the clock: the TTL is reached without waiting for it. */
function manualClock() {
  let now = 0;
  const timers = new Set<{ expire: () => void; at: number }>();
  const startTimer: ExpiryTimer = (expire, ms) => {
    const timer = { expire, at: now + ms };
    timers.add(timer);
    return () => timers.delete(timer);
  };
  const advance = (ms: number) => {
    now += ms;
    for (const timer of [...timers]) {
      if (timer.at > now) continue;
      timers.delete(timer);
      timer.expire();
    }
  };
  return { startTimer, advance, pending: () => timers.size };
}

/** A real run whose root model calls the caller's tool first, then answers: paused at its hand-back. */
async function pausedRun(): Promise<{ run: ActiveRun; callId: string }> {
  const root = new ScriptedModel([{ content: null, toolCalls: [{ name: 'lookup', arguments: {} }] }, repl('FINAL("resumed")')]);
  const run = new ActiveRun(new RLM({ model: 'root', languageModel: root }), { context: 'c', query: 'q', callerTools: { specs: [lookup], toolChoice: undefined } });
  const step = await run.next();
  if (step.type !== 'tool-calls') throw new Error(`the run did not pause: ${JSON.stringify(step)}`);
  return { run, callId: step.calls[0]!.id };
}

describe('paused runs and their time to live', () => {
  it('stops a run once its TTL has passed, and then answers its tool results with a 404', async () => {
    const clock = manualClock();
    const paused = new PausedRuns({ ttlMs: TTL_MS, max: 10, startTimer: clock.startTimer });
    const { run, callId } = await pausedRun();
    paused.keep(run);
    clock.advance(TTL_MS - 1);
    expect(paused.size).toBe(1);
    clock.advance(1);
    expect(paused.size).toBe(0);
    const step: RunStep = await run.next();
    expect(step.type).toBe('failed');
    expect((step as Extract<RunStep, { type: 'failed' }>).error).toMatchObject({ message: 'no tool results within 60 s' });
    expect(thrownBy(() => paused.take([callId]), ApiError)).toMatchObject({ status: 404, code: 'tool_call_not_found', message: expect.stringContaining('it expired (paused runs are kept 60 s)') });
  });

  it('forgets the expiry of a run that is resumed in time', async () => {
    const clock = manualClock();
    const paused = new PausedRuns({ ttlMs: TTL_MS, max: 10, startTimer: clock.startTimer });
    const { run, callId } = await pausedRun();
    paused.keep(run);
    clock.advance(TTL_MS / 2);
    expect(paused.take([callId])).toBe(run);
    expect(clock.pending()).toBe(0);
    clock.advance(TTL_MS);
    run.deliver(new Map([[callId, 'a result']]));
    expect(await run.next()).toMatchObject({ type: 'answer', answer: 'resumed' });
  });
});
