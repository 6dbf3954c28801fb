import { describe, expect, it } from 'vitest';
import { ApiError, ChatCompletions, RLM, splitModelName } from '../../src/index.js';
import { ScriptedModel } from '../../src/testing.js';
import { repl } from '../repl.js';

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

describe('a caller gone before its run starts', () => {
  it('cancels the run instead of answering nobody', async () => {
    const root = new ScriptedModel([repl('print(1)'), 'FINAL(never seen)']);
    const gone = new Error('the client went away');
    const error = await api(root)
      .create({ model: 'root', messages: [{ role: 'user', content: 'q' }] }, { signal: AbortSignal.abort(gone) })
      .catch((caught: unknown) => caught);
    expect(error).toBe(gone);
    expect(root.calls.length).toBeLessThan(2);
  });
});

describe('splitModelName', () => {
  it('splits root:sub, keeps listed names whole, and lets rlm_sub_model win', () => {
    expect(splitModelName('gpt-5:gpt-5-mini')).toEqual({ root: 'gpt-5', sub: 'gpt-5-mini' });
    expect(splitModelName('qwen2.5:7b', undefined, new Set(['qwen2.5:7b']))).toEqual({ root: 'qwen2.5:7b', sub: 'qwen2.5:7b' });
    expect(splitModelName('qwen2.5:7b:llama3.1:8b', undefined, new Set(['qwen2.5:7b', 'llama3.1:8b']))).toEqual({ root: 'qwen2.5:7b', sub: 'llama3.1:8b' });
    expect(splitModelName('plain', 'small')).toEqual({ root: 'plain', sub: 'small' });
  });

  it('splits when the upstream lists nothing: an empty list knows no names', () => {
    expect(splitModelName('gpt-5:gpt-5-mini', undefined, new Set())).toEqual({ root: 'gpt-5', sub: 'gpt-5-mini' });
  });
});

describe('how an answer came about: finish_reason and the rlm object', () => {
  const question = { model: 'root', messages: [{ role: 'user' as const, content: 'q' }] };
  const forcedScript = () => new ScriptedModel([repl('print(1)'), 'Still looking.']);
  const oneIteration = (root: ScriptedModel, prices = {}) =>
    new ChatCompletions({ rlmFor: ({ root: model }) => new RLM({ model, languageModel: root, maxIterations: 1, prices }) });

  it('marks a forced answer with finish_reason "length" and rlm.forced, keeping the answer', async () => {
    const completion = await oneIteration(forcedScript()).create(question);
    expect(completion.choices[0]).toMatchObject({ message: { content: 'Still looking.' }, finish_reason: 'length' });
    expect(completion.rlm).toEqual({ forced: true, iterations: 1, cost_usd: null });
  });

  it('marks it in the last streamed chunk too', async () => {
    const chunks = await oneIteration(forcedScript()).create({ ...question, stream: true, stream_options: { include_usage: true } });
    const received = [];
    for await (const chunk of chunks) received.push(chunk);
    const finish = received.find((chunk) => chunk.choices[0]?.finish_reason);
    expect(finish).toMatchObject({ choices: [{ finish_reason: 'length' }], rlm: { forced: true, iterations: 1, cost_usd: null } });
    expect(received.at(-1)!.usage?.total_tokens).toBeGreaterThan(0);
  });

  it('says an answer was not forced, with its iterations and cost, and so does a hand-back', async () => {
    const prices = { root: { inputPerMillion: 1_000_000, outputPerMillion: 0 } };
    const answered = await oneIteration(new ScriptedModel([repl('FINAL(42)')]), prices).create(question);
    expect(answered.choices[0]!.finish_reason).toBe('stop');
    expect(answered.rlm).toEqual({ forced: false, iterations: 1, cost_usd: expect.any(Number) });
    expect(answered.rlm.cost_usd).toBeGreaterThan(0);
    const handBack = await api(new ScriptedModel([{ content: null, toolCalls: [{ name: 'lookup', arguments: {} }] }])).create({ ...question, tools: [tool] });
    expect(handBack.choices[0]!.finish_reason).toBe('tool_calls');
    expect(handBack.rlm).toEqual({ forced: false, iterations: 1, cost_usd: null });
  });
});
