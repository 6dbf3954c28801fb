import { describe, expect, it } from 'vitest';
import { RLM } from '../../src/index.js';
import { models } from './helpers.js';
import { repl } from '../repl.js';

describe('what model code cannot do to a run', () => {
  it('cannot grow the root prompt past the output limit through errors and variable names', async () => {
    const { rootModel, languageModel } = models([
      repl(`
        for (let i = 0; i < 5_000; i++) globalThis['v_' + 'x'.repeat(400) + i] = i;
        throw new Error('m'.repeat(2_000_000));
      `),
      repl('FINAL("done")'),
    ]);
    const result = await new RLM({ model: 'root', languageModel, sandbox: { outputLimitChars: 1_000 } }).completion('c');
    expect(result.response).toBe('done');
    const secondPrompt = JSON.stringify(rootModel.calls[1]!.messages);
    const firstPrompt = JSON.stringify(rootModel.calls[0]!.messages);
    // What the block added: its code echoed back, plus a bounded report.
    expect(secondPrompt.length - firstPrompt.length).toBeLessThan(20_000);
    expect(secondPrompt).toContain('and 4900 more');
  });

  it('refuses a batch larger than the model calls left, before spending on any of it', async () => {
    const { subModel, languageModel } = models(
      [repl('try { llm_query_batched(new Array(50).fill("q")) } catch (error) { print(error.message) }'), repl('FINAL("stopped")')],
      () => 'answer',
    );
    const result = await new RLM({ model: 'root', subModel: 'sub', languageModel, maxLlmCalls: 10 }).completion('c');
    expect(result.response).toBe('stopped');
    expect(subModel.calls).toHaveLength(0);
    const output = result.trajectory[0]!.codeBlocks[0]!.result.stdout;
    expect(output).toContain('llm_query_batched: 50 prompts, but only 9 model calls remain');
  });
});

describe('sessions', () => {
  it('load a later turn\'s input even if an earlier turn declared its name', async () => {
    const { languageModel } = models([
      repl('var context_1 = "squatted"; var history_0 = "squatted"; FINAL("first done")'),
      repl('FINAL([context_1, typeof history_0].join("|"))'),
    ]);
    const session = new RLM({ model: 'root', languageModel }).session();
    try {
      expect((await session.completion('first')).response).toBe('first done');
      expect((await session.completion('second')).response).toBe('second|object');
    } finally {
      await session.close();
    }
  });

});
