import { describe, expect, it } from 'vitest';
import { ApiError, ChatCompletions, RLM, splitModelName } from '../../src/index.js';
import { ScriptedModel } from '../../src/testing.js';

const repl = (code: string) => '```repl\n' + code + '\n```';
const tool = { type: 'function' as const, function: { name: 'lookup', parameters: { type: 'object', properties: {} } } };

function api(root: ScriptedModel, options: { maxPausedRuns?: number } = {}) {
  return new ChatCompletions({ rlmFor: ({ root: model }) => new RLM({ model, languageModel: root }), ...options });
}

describe('ChatCompletions without HTTP', () => {
  it('answers a request body with a chat.completion object', async () => {
    const completion = await api(new ScriptedModel([repl('print(context)'), 'FINAL(it says hello)'])).create({
      model: 'root',
      messages: [
        { role: 'system', content: 'hello' },
        { role: 'user', content: 'What does it say?' },
      ],
    });
    expect(completion).toMatchObject({ object: 'chat.completion', model: 'root', choices: [{ message: { role: 'assistant', content: 'it says hello' }, finish_reason: 'stop' }] });
  });

  it('streams chunks as an async iterable', async () => {
    const chunks = await api(new ScriptedModel([repl('print(1)'), 'FINAL(streamed)'])).create({ model: 'root', messages: [{ role: 'user', content: 'q' }], stream: true });
    const deltas: string[] = [];
    for await (const chunk of chunks) deltas.push(chunk.choices[0]?.delta.content ?? '');
    expect(deltas.join('')).toBe('streamed');
  });

  it('stops the oldest paused run when there are too many', async () => {
    const completions = api(new ScriptedModel(() => ({ content: null, toolCalls: [{ name: 'lookup', arguments: {} }] })), { maxPausedRuns: 1 });
    const first = await completions.create({ model: 'root', messages: [{ role: 'user', content: 'one' }], tools: [tool] });
    await completions.create({ model: 'root', messages: [{ role: 'user', content: 'two' }], tools: [tool] });
    expect(completions.pausedRuns).toBe(1);
    const call = first.choices[0]!.message.tool_calls![0]!;
    const error = await completions
      .create({ model: 'root', messages: [{ role: 'user', content: 'one' }, { role: 'assistant', tool_calls: [call] }, { role: 'tool', tool_call_id: call.id, content: 'late' }] })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).status).toBe(404);
  });

  it('asks for every result of a hand-back', async () => {
    const completions = api(new ScriptedModel([{ content: null, toolCalls: [{ name: 'lookup', arguments: {} }, { name: 'lookup', arguments: { again: true } }] }]));
    const first = await completions.create({ model: 'root', messages: [{ role: 'user', content: 'q' }], tools: [tool] });
    const [one] = first.choices[0]!.message.tool_calls!;
    const error = (await completions
      .create({ model: 'root', messages: [{ role: 'user', content: 'q' }, { role: 'assistant', tool_calls: first.choices[0]!.message.tool_calls }, { role: 'tool', tool_call_id: one!.id, content: 'x' }] })
      .catch((caught: unknown) => caught)) as ApiError;
    expect(error.status).toBe(400);
    expect(error.message).toMatch(/Tool results are missing for call_/);
  });
});

describe('splitModelName', () => {
  it('splits root:sub, keeps listed names whole, and lets rlm_sub_model win', () => {
    expect(splitModelName('gpt-5:gpt-5-mini')).toEqual({ root: 'gpt-5', sub: 'gpt-5-mini' });
    expect(splitModelName('qwen2.5:7b', undefined, new Set(['qwen2.5:7b']))).toEqual({ root: 'qwen2.5:7b', sub: 'qwen2.5:7b' });
    expect(splitModelName('qwen2.5:7b:llama3.1:8b', undefined, new Set(['qwen2.5:7b', 'llama3.1:8b']))).toEqual({ root: 'qwen2.5:7b', sub: 'llama3.1:8b' });
    expect(splitModelName('plain', 'small')).toEqual({ root: 'plain', sub: 'small' });
  });
});
