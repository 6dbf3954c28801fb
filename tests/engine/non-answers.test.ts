import { describe, expect, it } from 'vitest';
import { RLM, RunLimitError, type ToolCall } from '../../src/index.js';
import { ScriptedModel } from '../../src/testing.js';
import { rejectionOf } from '../rejection.js';
import { everythingSent, lastUserMessage, models } from './helpers.js';
import { repl } from '../repl.js';

// A run never ends with a non-answer ("[object Promise]", "{}", "undefined"): the model gets an
// error it can fix, or the run fails saying why.

const searchSpec = { type: 'function' as const, function: { name: 'search_database', description: 'Search', parameters: { type: 'object', properties: { query: { type: 'string' } } } } };

function searchingCaller() {
  const handedBack: ToolCall[][] = [];
  return {
    handedBack,
    callerTools: {
      specs: [searchSpec],
      call: async (calls: ToolCall[]) => {
        handedBack.push(calls);
        return calls.map(() => '{"rows": 3}');
      },
    },
  };
}

describe('a forgotten await on a caller tool', () => {
  it('reaches the model as an error, which it fixes next turn; the run does not answer with the promise', async () => {
    const root = new ScriptedModel([
      repl('const rows = tools.search_database({ query: "refunds" });\nFINAL(rows)'),
      repl('const found = await tools.search_database({ query: "refunds" });\nFINAL(`${found.rows} refunds`)'),
    ]);
    const caller = searchingCaller();
    const result = await new RLM({ model: 'root', languageModel: root }).completion({ context: 'c', callerTools: caller.callerTools });
    expect(result.response).toBe('3 refunds');
    expect(result.iterations).toBe(2);
    expect(everythingSent(root)).toContain('FINAL got a Promise, not its value: await it first: FINAL(await x).');
    // The call the first block never awaited was never handed back to the caller.
    expect(caller.handedBack).toHaveLength(1);
  });

  it('in a template string is refused as well, with a note naming the call', async () => {
    const root = new ScriptedModel([
      repl('const rows = tools.search_database({ query: "refunds" });\nFINAL(`found: ${rows}`)'),
      repl('const found = await tools.search_database({ query: "refunds" });\nFINAL(`found: ${found.rows}`)'),
    ]);
    const result = await new RLM({ model: 'root', languageModel: root }).completion({ context: 'c', callerTools: searchingCaller().callerTools });
    expect(result.response).toBe('found: 3');
    const sent = everythingSent(root);
    expect(sent).toContain('FINAL was not accepted: this block ended with tool calls it never awaited');
    expect(sent).toContain('never awaited 1 call to tools.search_database');
  });
});

describe('FINAL_VAR of a variable that is undefined (its block threw)', () => {
  const throwingBlock = repl('const result = (() => { throw new Error("boom") })()');

  it('is refused as a text answer, and the model is told why', async () => {
    const { rootModel, languageModel } = models([throwingBlock, 'FINAL_VAR(result)', 'FINAL(the real answer)']);
    const result = await new RLM({ model: 'root', languageModel }).completion('c');
    expect(result.response).toBe('the real answer');
    expect(lastUserMessage(rootModel.calls[2]!)).toContain('FINAL_VAR error: the variable "result" is undefined');
  });

  it('is refused as the forced answer: the run fails saying why, never answering "undefined"', async () => {
    const { languageModel } = models([throwingBlock, 'FINAL_VAR(result)']);
    const failure = await rejectionOf(new RLM({ model: 'root', languageModel, maxIterations: 1 }).completion('c'), RunLimitError);
    expect(failure.code).toBe('max_iterations');
    expect(failure.message).toBe(
      'The run used all 1 iterations, and the answer of its last reply was refused: FINAL_VAR error: the variable "result" is undefined, so it holds no answer (was the block that sets it stopped by an error?).',
    );
  });

  it('holding a promise is refused as the forced answer too', async () => {
    const { languageModel } = models([repl('var later = Promise.resolve("late")'), 'FINAL_VAR(later)']);
    const failure = await rejectionOf(new RLM({ model: 'root', languageModel, maxIterations: 1 }).completion('c'), RunLimitError);
    expect(failure.message).toContain('its last reply was refused: FINAL_VAR("later") got a Promise, not its value: await it first: FINAL(await later).');
  });
});
