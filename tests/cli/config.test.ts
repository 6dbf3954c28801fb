import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RLM, RunLimitError } from '../../src/index.js';
import { ScriptedModel, startFakeOpenAIServer, type FakeOpenAIServer, type FakeReply } from '../../src/testing.js';
import { runCli, scratch, scratchFile } from './helpers.js';
import { repl } from '../repl.js';

// Configuration that can only fail at run time is checked before the run: exit 2, with the fix.

let replies: FakeReply[] = [];
let server: FakeOpenAIServer;
beforeAll(async () => {
  server = await startFakeOpenAIServer({ reply: () => replies.shift() ?? 'FINAL(default)' });
});
afterAll(() => server.close());

const run = (...args: string[]) => runCli(['run', '--base-url', server.baseURL, '--context', scratchFile('c.txt', 'context'), ...args, 'q']);

describe('--log-dir', () => {
  it('refuses a file as the log folder, before the run', async () => {
    const result = await run('--log-dir', scratchFile('not-a-folder', 'x'));
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/Cannot write the log to .*not-a-folder: it exists and is not a folder\. Choose another folder with --log-dir/);
    expect(server.requests.length).toBe(0);
  });

  it('refuses a folder under /proc at once instead of spinning', async () => {
    const started = Date.now();
    const result = await run('--log-dir', '/proc/rlm-logs/run');
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('Cannot write the log to /proc/rlm-logs/run: a folder above it cannot be created');
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('creates a missing log folder, several levels deep', async () => {
    replies = [repl('print(1)'), 'FINAL(logged)'];
    const result = await run('--model', 'root', '--log-dir', `${scratch}/logs/deep/er`);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('logged\n');
  });
});

describe('budgets and prices', () => {
  it('refuses --max-budget for a model without a price, naming it and --price', async () => {
    const result = await run('--model', 'my-local-model', '--max-budget', '1');
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('A budget (--max-budget, maxBudgetUsd) needs prices, and "my-local-model" has none.');
    expect(result.stderr).toContain('--price my-local-model=0.5,2');
  });

  it('takes prices from --price', async () => {
    replies = [repl('print(1)'), 'FINAL(priced)'];
    const result = await run('--model', 'my-local-model', '--max-budget', '1', '--price', 'my-local-model=0.5,2', '--json');
    expect(result.code).toBe(0);
    const { usage } = JSON.parse(result.stdout) as { usage: { costUsd: number; costComplete: boolean } };
    expect(usage.costComplete).toBe(true);
    expect(usage.costUsd).toBeGreaterThan(0);
  });

  it('rejects a malformed --price', async () => {
    const result = await run('--price', 'my-model:cheap');
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('expected MODEL=IN,OUT');
  });

  it('never says the budget was reached at the budget: spent is shown larger', async () => {
    const model = new ScriptedModel(() => ({ content: repl('print(1)'), usage: { inputTokens: 50_001, outputTokens: 0 } }));
    const rlm = new RLM({ model: 'root', languageModel: model, maxBudgetUsd: 0.05, prices: { root: { inputPerMillion: 1, outputPerMillion: 1 } } });
    const error = await rlm.completion('c').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(RunLimitError);
    expect((error as Error).message).toBe('Budget reached: $0.050001 spent, more than the budget of $0.050000.');
  });

  it('counts sub-calls cut off in flight, so the budget errs high', async () => {
    const root = new ScriptedModel([{ content: repl('llm_query_batched(["costly", "slow"])'), usage: { inputTokens: 0, outputTokens: 0 } }]);
    const sub = new ScriptedModel((request) =>
      JSON.stringify(request.messages).includes('costly') ? { content: 'done', usage: { inputTokens: 2_000_000, outputTokens: 0 } } : { content: 'late', delayMs: 10_000 },
    );
    const rlm = new RLM({
      model: 'root',
      subModel: 'sub',
      languageModel: { chat: (request) => (request.model === 'root' ? root : sub).chat(request) },
      maxBudgetUsd: 1,
      prices: { root: { inputPerMillion: 1, outputPerMillion: 1 }, sub: { inputPerMillion: 1, outputPerMillion: 1 } },
    });
    const error = (await rlm.completion('c').catch((caught: unknown) => caught)) as RunLimitError;
    expect(error.code).toBe('max_budget');
    expect(error.usage?.byModel.sub?.calls).toBe(2);
    expect(error.usage!.byModel.sub!.inputTokens).toBeGreaterThan(2_000_000);
  });

  it('refuses a sub-call to an unpriced model in a budgeted run, as an error the code can catch', async () => {
    const root = new ScriptedModel([repl('try { llm_query("q", "mystery-model") } catch (e) { print(e.message) }'), 'FINAL(ok)']);
    const rlm = new RLM({ model: 'gpt-5-mini', languageModel: root, maxBudgetUsd: 1 });
    const result = await rlm.completion('c');
    expect(result.trajectory[0]!.codeBlocks[0]!.result.stdout).toContain('model "mystery-model" has no price: give one with --price mystery-model=IN,OUT');
  });
});

describe('--idle-timeout', () => {
  it('reaches the model client: a reply that stalls is cut and retried', async () => {
    replies = [{ fault: 'stall-after-headers' }, repl('print(1)'), 'FINAL(after the stall)'];
    const result = await run('--model', 'root', '--idle-timeout', '0.3');
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('after the stall\n');
  });
});
