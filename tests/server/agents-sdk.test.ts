import { Agent, OpenAIResponsesModel, run, setTracingDisabled, tool } from '@openai/agents';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { repl } from '../repl.js';
import { rlmServer, seenByRoot } from './helpers.js';

// The OpenAI Agents SDK's default model speaks the Responses API: an agent whose model is rlm
// serve runs its own tools when the run hands calls back, and sends the whole input again.

setTracingDisabled(true); // traces would go to OpenAI's servers

/** The SDK bundles its own copy of the openai package: the same client class, typed apart. */
type AgentsClient = ConstructorParameters<typeof OpenAIResponsesModel>[0];

describe('the OpenAI Agents SDK', () => {
  it.each([false, true])('drives a tool loop through rlm serve (stream: %s)', async (stream) => {
    const code = `
      const refunds = await tools.count_refunds({ month: 'March' });
      const again = await tools.count_refunds({ month: 'April' });
      FINAL(\`\${refunds.count} in March, \${again.count} in April\`)`;
    const { client, rootRequests } = await rlmServer({ root: [repl('print(context.length)'), repl(code)] });
    const asked: string[] = [];
    const countRefunds = tool({
      name: 'count_refunds',
      description: 'Counts the refunds of a month',
      parameters: z.object({ month: z.string() }),
      execute: async ({ month }) => {
        asked.push(month);
        return JSON.stringify({ count: month.length });
      },
    });
    const agent = new Agent({ name: 'Analyst', instructions: 'The refund ledger, 2 MB of it.', model: new OpenAIResponsesModel(client as unknown as AgentsClient, 'root'), tools: [countRefunds] });
    const result = stream ? await run(agent, 'How many refunds in March and April?', { stream: true }) : await run(agent, 'How many refunds in March and April?');
    if ('completed' in result) {
      for await (const _event of result.toStream()) void _event;
      await result.completed;
    }
    expect(result.finalOutput).toBe('5 in March, 5 in April');
    expect(asked).toEqual(['March', 'April']);
    // One run: the instructions were its context, never shown to the root model.
    expect(seenByRoot(rootRequests[0]!)).toContain('How many refunds in March and April?');
    expect(rootRequests.map(seenByRoot).join('')).not.toContain('The refund ledger');
    expect(seenByRoot(rootRequests[1]!)).toContain('REPL output:\\n30');
  });
});
