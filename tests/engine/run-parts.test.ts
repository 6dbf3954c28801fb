import { describe, expect, it } from 'vitest';
import { RLM, RlmError, calculatorTool, echoTool, type RlmEvent } from '../../src/index.js';
import { InstallationError } from '../../src/errors.js';
import { estimateTokens } from '../../src/lm/token-estimate.js';
import { resultOf } from '../../src/engine/events.js';
import { RootConversation } from '../../src/engine/root-conversation.js';
import { ScriptedModel } from '../../src/testing.js';
import { rejectionOf } from '../rejection.js';

describe('a run event stream that ends without a result', () => {
  it('is reported as a bug in rlm (internal_error), not as a broken installation', async () => {
    async function* noResult(): AsyncGenerator<RlmEvent> {
      yield { type: 'iteration-start', runId: 'r', depth: 0, iteration: 1, maxIterations: 1 };
    }
    const error = await rejectionOf(resultOf(noResult()), RlmError);
    expect(error).not.toBeInstanceOf(InstallationError);
    expect(error.code).toBe('internal_error');
    expect(error.message).toContain('bug in rlm');
  });
});

describe('a block output too large for the window', () => {
  it('is cut to its share of the window as the window estimate measures it, not far below', () => {
    const contextWindow = 10_000;
    const conversation = new RootConversation({
      systemPrompt: 'system',
      firstMessage: 'first',
      query: undefined,
      rootModel: 'root',
      contextWindow,
      compaction: false,
      ask: async () => '',
      loadHistory: async () => {},
      onCompaction: () => {},
    });
    const result = { stdout: 'z'.repeat(200_000), durationMs: 1, variables: [], reset: false };
    const [output] = conversation.blockOutputs([{ code: 'print(big)', language: 'js', result, subcalls: [], toolCalls: [] }]);
    expect(String(output!.content)).toContain('output cut to fit');
    // Half the window is the most one output may take; a cut that overcounts characters per token wastes a sixth of it.
    const tokens = estimateTokens([output!]);
    expect(tokens).toBeLessThanOrEqual(contextWindow / 2);
    expect(tokens).toBeGreaterThanOrEqual(contextWindow / 2 - 100);
  });
});

describe('RLM.prepare()', () => {
  it('returns the tools model code will have and the warnings, not the internal run settings', async () => {
    const rlm = new RLM({ model: 'root', languageModel: new ScriptedModel([]), tools: [echoTool, calculatorTool] });
    expect(await rlm.prepare()).toEqual({ tools: ['echo', 'calculator'], warnings: [] });
  });

  it('leaves the way runs start out of the RLM a user holds', () => {
    const rlm = new RLM({ model: 'root', languageModel: new ScriptedModel([]) });
    expect(Object.getOwnPropertyNames(RLM.prototype)).not.toContain('startRun');
    expect('startRun' in rlm).toBe(false);
  });
});
