import { describe, expect, it } from 'vitest';
import { RLM, Responses, type ResponseEvent } from '../../src/index.js';
import { ScriptedModel } from '../../src/testing.js';
import { repl } from '../repl.js';

function api(root: ScriptedModel, options: { maxKeptResponses?: number } = {}) {
  return new Responses({ rlmFor: ({ root: model }) => new RLM({ model, languageModel: root }), ...options });
}

describe('Responses without HTTP', () => {
  it('answers a request body with a response object, kept for retrieve()', async () => {
    const responses = api(new ScriptedModel([repl('print(context)'), 'FINAL(it says hello)']));
    const response = await responses.create({ model: 'root', instructions: 'hello', input: 'What does it say?' });
    expect(response).toMatchObject({ object: 'response', status: 'completed', model: 'root', output: [{ type: 'message', content: [{ text: 'it says hello' }] }] });
    expect(responses.retrieve(response.id)).toEqual(response);
  });

  it('forgets the oldest finished response past the number kept', async () => {
    const responses = api(new ScriptedModel((request) => (JSON.stringify(request.messages).includes('REPL output') ? 'FINAL(done)' : repl('print(1)'))), { maxKeptResponses: 2 });
    const ids: string[] = [];
    for (let index = 0; index < 3; index++) ids.push((await responses.create({ model: 'root', input: `question ${index}` })).id);
    expect(() => responses.retrieve(ids[0]!)).toThrow(`No response ${ids[0]}`);
    expect(ids.slice(1).map((id) => responses.retrieve(id).status)).toEqual(['completed', 'completed']);
  });

  it('streams events as an async iterable', async () => {
    const events = await api(new ScriptedModel([repl('print(1)'), 'FINAL(streamed)'])).create({ model: 'root', input: 'q', stream: true });
    const seen: ResponseEvent[] = [];
    for await (const event of events) seen.push(event);
    expect(seen.filter((event) => event.type === 'response.output_text.delta').map((event) => event.delta)).toEqual(['streamed']);
    expect(seen.at(-1)!.type).toBe('response.completed');
  });

  it('cancels the run of a caller gone before it starts', async () => {
    const root = new ScriptedModel([repl('print(1)'), 'FINAL(never seen)']);
    const responses = api(root);
    const gone = new Error('the client went away');
    const error = await responses.create({ model: 'root', input: 'q' }, { signal: AbortSignal.abort(gone) }).catch((caught: unknown) => caught);
    expect(error).toBe(gone);
    expect(root.calls.length).toBeLessThan(2);
  });
});
