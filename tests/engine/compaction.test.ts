import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { RLM, RunLimitError, type ChatRequest, type RlmEvent } from '../../src/index.js';
import { contextWindowOf } from '../../src/engine/compaction.js';
import { DEFAULTS } from '../../src/defaults.js';
import { lastUserMessage, models } from './helpers.js';
import { rejectionOf } from '../rejection.js';
import { repl } from '../repl.js';
import { tempFolder } from '../temp-folder.js';

const WINDOW = 6_000;
/** How the scripted provider counts a prompt's tokens (what it reports as prompt_tokens). */
const providerTokens = (messages: unknown[]) => Math.ceil(JSON.stringify(messages).length / 4);
const asksForSummary = (request: ChatRequest) => lastUserMessage(request).includes('about to be replaced by a summary');
const wasCompacted = (request: ChatRequest) => request.messages.some((message) => String(message.content).includes('was replaced by your summary'));

/** A root model that prints near 2,000 characters a turn until its conversation has been compacted, then answers from a variable set before. */
function longRunner(label: string) {
  let turns = 0;
  return (request: ChatRequest) => {
    if (asksForSummary(request)) return `Summary (${label}): found is 42, kept in the variable found. Still to do: report it.`;
    if (wasCompacted(request)) return repl('FINAL(`found=${found} history=${history.length} first=${history[1].role}`)');
    turns += 1;
    return `Still reading (${label}).\n` + repl(turns === 1 ? `const found = 42; print("a".repeat(2000))` : `print("${label}".repeat(2000 / ${label.length}))`);
  };
}

async function collect(rlm: RLM, input: Parameters<RLM['stream']>[0]): Promise<RlmEvent[]> {
  const events: RlmEvent[] = [];
  for await (const event of rlm.stream(input)) events.push(event);
  return events;
}

describe('context windows', () => {
  it('come from the option, else the longest known prefix of the model name, else a conservative default', () => {
    expect(contextWindowOf('gpt-4o-mini', 1_000)).toBe(1_000);
    expect(contextWindowOf('gpt-4o-mini', undefined)).toBe(128_000);
    expect(contextWindowOf('gpt-4', undefined)).toBe(8_192);
    expect(contextWindowOf('gpt-4.1-nano', undefined)).toBe(1_047_576);
    expect(contextWindowOf('openrouter/anthropic/claude-sonnet', undefined)).toBe(200_000);
    expect(contextWindowOf('my-local-model', undefined)).toBe(DEFAULTS.engine.contextWindow);
  });
});

describe('compaction', () => {
  it('compacts at the threshold, keeps variables, loads the earlier turns as history, and never exceeds the window', async () => {
    const { rootModel, languageModel } = models(longRunner('b'));
    const logDir = tempFolder('rlm-compaction-');
    const events = await collect(new RLM({ model: 'root', languageModel, contextWindow: WINDOW, maxIterations: 20, logDir }), { context: 'c', query: 'What is found?' });
    const end = events.at(-1) as Extract<RlmEvent, { type: 'run-end' }>;
    expect(end.result.response).toMatch(/^found=42 history=\d+ first=user$/);
    const compactions = events.filter((event) => event.type === 'compaction');
    expect(compactions).toHaveLength(1);
    const [compaction] = compactions as Extract<RlmEvent, { type: 'compaction' }>[];
    expect(compaction!.tokensBefore).toBeGreaterThanOrEqual(WINDOW * 0.85);
    expect(compaction!.tokensAfter).toBeLessThan(WINDOW * 0.6);
    expect(compaction!.contextWindow).toBe(WINDOW);
    // history holds the system prompt, the first message and every replaced turn.
    expect(Number(/history=(\d+)/.exec(end.result.response)![1])).toBe(compaction!.messagesReplaced + 2);
    for (const call of rootModel.calls) expect(providerTokens(call.messages)).toBeLessThanOrEqual(WINDOW);
    // The request after compaction carries the summary and the question, not the old outputs.
    const after = rootModel.calls.find((call) => wasCompacted(call))!;
    expect(after.messages.map((message) => String(message.content)).join('\n')).toContain('found is 42');
    expect(after.messages.some((message) => String(message.content).includes('bbbbbbbbbb'))).toBe(false);
    const log = readFileSync(end.result.logPath!, 'utf8').trim().split('\n').map((line) => JSON.parse(line));
    expect(log.find((line) => line.type === 'compaction')).toMatchObject({ tokens_before: compaction!.tokensBefore, tokens_after: compaction!.tokensAfter, summary: expect.stringContaining('found is 42') });
  });

  it('uses the prompt tokens the provider reported, not only its own estimate', async () => {
    let first = true;
    const { rootModel, languageModel } = models((request) => {
      if (asksForSummary(request)) return 'Summary: nothing yet.';
      if (wasCompacted(request)) return repl('FINAL("done")');
      if (!first) return repl('print(1)');
      first = false;
      // Tiny text, but the provider counted almost the whole window (e.g. a big tool schema).
      return { content: repl('print(1)'), usage: { inputTokens: WINDOW - 100, outputTokens: 5 } };
    });
    const events = await collect(new RLM({ model: 'root', languageModel, contextWindow: WINDOW }), 'c');
    expect(events.filter((event) => event.type === 'compaction')).toHaveLength(1);
    expect(rootModel.calls).toHaveLength(3);
  });

  it('with compaction off, ends a run whose conversation would overflow with context_window and the partial answer', async () => {
    const { rootModel, languageModel } = models(longRunner('c'));
    const error = await rejectionOf(new RLM({ model: 'root', languageModel, contextWindow: WINDOW, maxIterations: 20, compaction: false }).completion('c'), RunLimitError);
    expect(error).toMatchObject({ code: 'context_window', message: expect.stringContaining('compaction is off'), partialAnswer: 'Still reading (c).', usage: { calls: rootModel.calls.length } });
    for (const call of rootModel.calls) expect(providerTokens(call.messages)).toBeLessThanOrEqual(WINDOW);
    expect(rootModel.calls.some(asksForSummary)).toBe(false);
  });

  it('compacts at a configured threshold', async () => {
    const { languageModel } = models(longRunner('d'));
    const events = await collect(new RLM({ model: 'root', languageModel, contextWindow: WINDOW, maxIterations: 20, compaction: { thresholdPct: 50 } }), 'c');
    const [compaction] = events.filter((event) => event.type === 'compaction') as Extract<RlmEvent, { type: 'compaction' }>[];
    expect(compaction!.tokensBefore).toBeGreaterThanOrEqual(WINDOW * 0.5);
    expect(compaction!.tokensBefore).toBeLessThan(WINDOW * 0.85);
  });

  it('cuts a single block output that would overflow the window, saying so', async () => {
    const { rootModel, languageModel } = models([repl('print("z".repeat(50000))'), 'FINAL(ok)']);
    await new RLM({ model: 'root', languageModel, contextWindow: WINDOW, sandbox: { outputLimitChars: 100_000 } }).completion('c');
    const output = String(rootModel.calls[1]!.messages.find((message) => String(message.content).includes('zzzz'))!.content);
    expect(output).toMatch(/output cut to fit the model's context window: the first [\d,]+ of [\d,]+ characters are shown/);
    expect(providerTokens(rootModel.calls[1]!.messages)).toBeLessThanOrEqual(WINDOW);
  });

  it('compacts a child run’s own conversation', async () => {
    const child = longRunner('e');
    const { languageModel } = models((request) => {
      if (String(request.messages[1]?.content).includes('child run')) return child(request);
      return request.messages.length > 3 ? 'FINAL(parent done)' : repl('print(rlm_query("child run: find it"))');
    });
    const events = await collect(new RLM({ model: 'root', languageModel, contextWindow: WINDOW, maxDepth: 2, maxIterations: 20 }), 'c');
    const compactions = events.filter((event) => event.type === 'compaction');
    expect(compactions.map((event) => event.depth)).toEqual([1]);
    const childEnd = events.find((event) => event.type === 'final' && event.depth === 1) as Extract<RlmEvent, { type: 'final' }>;
    expect(childEnd.answer).toMatch(/^found=42/);
  });
});
