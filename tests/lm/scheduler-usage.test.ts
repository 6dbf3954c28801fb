import { singleModelProvider } from '../../src/lm/provider.js';
import { describe, expect, it } from 'vitest';
import { ConfigurationError, type ModelCallEvent } from '../../src/index.js';
import { ModelGateway } from '../../src/lm/gateway.js';
import { findPrice } from '../../src/lm/prices.js';
import { ModelScheduler } from '../../src/lm/scheduler.js';
import { UsageTracker } from '../../src/lm/usage.js';
import { ScriptedModel } from '../../src/testing.js';
import { deferred } from '../deferred.js';
import { rejectionOf, thrownBy } from '../rejection.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('ModelScheduler', () => {
  it('limits requests in flight per model', async () => {
    const scheduler = new ModelScheduler(3);
    let inFlight = 0;
    let peak = 0;
    const task = async () => {
      peak = Math.max(peak, ++inFlight);
      await sleep(10);
      inFlight--;
    };
    await Promise.all(Array.from({ length: 20 }, () => scheduler.run('a', task)));
    expect(peak).toBe(3);
  });

  it('gives each model its own limit', async () => {
    const scheduler = new ModelScheduler(1);
    const running = new Set<string>();
    let overlapped = false;
    const task = (name: string) => async () => {
      running.add(name);
      if (running.size > 1) overlapped = true;
      await sleep(20);
      running.delete(name);
    };
    await Promise.all([scheduler.run('a', task('a')), scheduler.run('b', task('b'))]);
    expect(overlapped).toBe(true);
  });

  it('drops queued work when its signal aborts', async () => {
    const scheduler = new ModelScheduler(1);
    const firstMayEnd = deferred();
    const first = scheduler.run('a', () => firstMayEnd.promise);
    const controller = new AbortController();
    let ran = false;
    const queued = scheduler.run('a', async () => void (ran = true), controller.signal);
    const cancelled = new Error('cancelled');
    controller.abort(cancelled);
    expect(await rejectionOf(queued, Error)).toBe(cancelled);
    firstMayEnd.resolve();
    await first;
    expect(ran).toBe(false);
  });

  it('rejects a bad concurrency', () => {
    expect(thrownBy(() => new ModelScheduler(0), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/whole number >= 1, got 0/) });
  });
});

describe('usage and cost', () => {
  it('counts calls and tokens per model and prices known models', () => {
    const usage = new UsageTracker();
    usage.record('gpt-5-mini', { inputTokens: 1_000_000, outputTokens: 100_000 });
    usage.record('gpt-5-mini', { inputTokens: 1_000_000, outputTokens: 0 });
    const summary = usage.summary();
    expect(summary.byModel['gpt-5-mini']).toEqual({ calls: 2, inputTokens: 2_000_000, outputTokens: 100_000, costUsd: 0.25 * 2 + 2 * 0.1 });
    expect(summary.costComplete).toBe(true);
    expect(summary.costUsd).toBeCloseTo(0.7);
  });

  it('marks cost incomplete for a model without a price, and takes user prices', () => {
    const unknown = new UsageTracker();
    unknown.record('my-local-llama', { inputTokens: 100, outputTokens: 100 });
    expect(unknown.summary()).toMatchObject({ costUsd: null, costComplete: false, byModel: { 'my-local-llama': { costUsd: null } } });
    const priced = new UsageTracker({ 'my-local-llama': { inputPerMillion: 1, outputPerMillion: 2 } });
    priced.record('my-local-llama', { inputTokens: 1_000_000, outputTokens: 1_000_000 });
    expect(priced.summary().costUsd).toBe(3);
  });

  it('finds prices through provider prefixes and date suffixes', () => {
    const prices = { 'gpt-4o': { inputPerMillion: 2.5, outputPerMillion: 10 } };
    expect(findPrice('openai/gpt-4o', prices)).toBe(prices['gpt-4o']);
    expect(findPrice('gpt-4o-2024-08-06', prices)).toBe(prices['gpt-4o']);
    expect(findPrice('gpt-4o-mini', prices)).toBeUndefined();
  });

  it('adds child usage into every ancestor', () => {
    const root = new UsageTracker();
    const child = root.child();
    const grandchild = child.child();
    root.record('a', { inputTokens: 1, outputTokens: 1 });
    grandchild.record('b', { inputTokens: 5, outputTokens: 5 });
    expect(Object.keys(root.summary().byModel)).toEqual(['a', 'b']);
    expect(child.summary().calls).toBe(1);
    expect(grandchild.summary().inputTokens).toBe(5);
  });
});

describe('ModelGateway', () => {
  it('reports start, running and end of every call with model, depth, tokens, duration and errors', async () => {
    const events: ModelCallEvent[] = [];
    const boom = new Error('boom');
    const model = new ScriptedModel([{ content: 'fine', usage: { inputTokens: 7, outputTokens: 2 } }, boom]);
    const gateway = new ModelGateway({ models: singleModelProvider(model), scheduler: new ModelScheduler(), usage: new UsageTracker(), onEvent: (event) => events.push(event) });
    const child = gateway.child();
    await child.chat({ model: 'sub', messages: [{ role: 'user', content: 'q' }] });
    expect(await rejectionOf(child.chat({ model: 'sub', messages: [{ role: 'user', content: 'q' }] }), Error)).toBe(boom);
    expect(events.map((event) => `${event.type}@${event.depth}`)).toEqual([
      'llm-call-start@1',
      'llm-call-running@1',
      'llm-call-end@1',
      'llm-call-start@1',
      'llm-call-running@1',
      'llm-call-end@1',
    ]);
    const [, , ok, , , failed] = events;
    expect(ok).toMatchObject({ model: 'sub', response: { usage: { inputTokens: 7, outputTokens: 2 } } });
    expect((ok as { durationMs: number }).durationMs).toBeGreaterThanOrEqual(0);
    expect(failed).toMatchObject({ error: { name: 'Error', message: 'boom' } });
    expect(gateway.usage.summary().byModel.sub).toMatchObject({ calls: 1, inputTokens: 7 });
  });
});

describe('ScriptedModel', () => {
  it('records calls and fails loudly on an unexpected one', async () => {
    const model = new ScriptedModel(['only reply']);
    expect((await model.chat({ model: 'm', messages: [{ role: 'user', content: 'first' }] })).content).toBe('only reply');
    await expect(model.chat({ model: 'm', messages: [{ role: 'user', content: 'second' }] })).rejects.toThrow(/unexpected call #2 \(the script has 1 replies\). Last message: "second"/);
    expect(model.calls.map((call) => call.messages[0])).toEqual([{ role: 'user', content: 'first' }, { role: 'user', content: 'second' }]);
  });

  it('answers from a reply function with the call index', async () => {
    const model = new ScriptedModel((request, index) => `${index}:${request.model}`);
    expect((await model.chat({ model: 'x', messages: [] })).content).toBe('0:x');
    expect((await model.chat({ model: 'y', messages: [] })).content).toBe('1:y');
  });
});

describe('costs people read', () => {
  it('carries no float noise', () => {
    const usage = new UsageTracker({ cheap: { inputPerMillion: 0.35, outputPerMillion: 0.7 } });
    for (let index = 0; index < 7; index++) usage.record('cheap', { inputTokens: 1, outputTokens: 3 });
    const summary = usage.summary();
    expect(summary.costUsd).toBe(0.0000171500);
    expect(String(summary.costUsd)).toBe('0.00001715');
    expect(summary.byModel.cheap!.costUsd).toBe(0.00001715);
  });
});
