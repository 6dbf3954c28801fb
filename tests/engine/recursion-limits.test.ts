import { describe, expect, it } from 'vitest';
import { RLM, RunLimitError, type ChatRequest } from '../../src/index.js';
import { lastUserMessage, models } from './helpers.js';
import { rejectionOf } from '../rejection.js';
import { repl } from '../repl.js';

const isChild = (request: ChatRequest) => String(request.messages[1]?.content ?? '').includes('You are a child run');

describe('recursion', () => {
  it('with maxDepth 1, rlm_query behaves like llm_query on the sub-model', async () => {
    const { subModel, languageModel } = models([repl('FINAL(rlm_query("small task"))')], ['plain answer']);
    const result = await new RLM({ model: 'root', subModel: 'sub', languageModel }).completion('c');
    expect(result.response).toBe('plain answer');
    expect(subModel.calls[0]).toMatchObject({ model: 'sub', messages: [{ role: 'user', content: 'small task' }] });
  });

  it('with maxDepth 2, rlm_query starts a child RLM whose context is the prompt', async () => {
    const { rootModel, subModel, languageModel } = models(
      (request) => {
        if (isChild(request)) {
          return request.messages.some((message) => String(message.content).startsWith('Code executed'))
            ? 'FINAL(child says ' + '42)'
            : repl('print(context); const inner = llm_query("leaf: " + context); const deeper = rlm_query("too deep")');
        }
        return repl('FINAL(rlm_query("the child task"))');
      },
      (request) => `sub:${lastUserMessage(request)}`,
    );
    const rlm = new RLM({ model: 'root', subModel: 'sub', languageModel, maxDepth: 2 });
    const result = await rlm.completion('parent context');
    expect(result.response).toBe('child says 42');
    const childCalls = rootModel.calls.filter(isChild);
    expect(childCalls.length).toBe(2);
    expect(childCalls[0]!.model).toBe('root'); // the child's root model defaults to the parent's
    expect(childCalls[0]!.messages[1]!.content).toContain('a string of 14 characters');
    // The child's sub-calls use the sub-model; its own rlm_query falls back to llm_query.
    expect(subModel.calls.map((call) => lastUserMessage(call))).toEqual(['leaf: the child task', 'too deep']);
    expect(subModel.calls.every((call) => call.model === 'sub')).toBe(true);
    // Child iterations are nested in the parent's trajectory.
    const subcall = result.trajectory[0]!.codeBlocks[0]!.subcalls[0]!;
    expect(subcall).toMatchObject({ kind: 'rlm', response: 'child says 42' });
    expect(subcall.iterations).toHaveLength(2);
  });

  it('picks the child root model with { model }, runs batches, and reports a failing child as a catchable error', async () => {
    const { rootModel, languageModel } = models((request) => {
      if (isChild(request)) {
        if (String(request.messages[1]!.content).includes('a string of 4 characters') && request.model === 'child-b') throw new Error('child model down');
        return repl('FINAL("ok from " + context)');
      }
      return request.messages.some((message) => String(message.content).includes('Code executed'))
        ? 'FINAL(done)'
        : repl('const results = rlm_query_batched(["one", "two"], { model: "child-a" }); let caught; try { rlm_query("four", "child-b") } catch (e) { caught = e.message } print(JSON.stringify({ results, caught }))');
    });
    const result = await new RLM({ model: 'root', languageModel, maxDepth: 2 }).completion('c');
    expect(result.response).toBe('done');
    const output = String(rootModel.calls.at(-1)!.messages.at(-1)!.content); // the block's output, then the turn prompt
    expect(output).toContain('"results":["ok from one","ok from two"]');
    expect(output).toContain('"caught":"child model down"');
    expect(rootModel.calls.filter(isChild).map((call) => call.model)).toEqual(expect.arrayContaining(['child-a', 'child-b']));
  });

  it('runs at most maxConcurrentChildren children at once', async () => {
    const { languageModel } = models((request) =>
      isChild(request) ? { content: repl('FINAL(context)'), delayMs: 20 } : repl('FINAL(rlm_query_batched(["a", "b", "c", "d", "e", "f", "g"]).join(""))'),
    );
    const rlm = new RLM({ model: 'root', languageModel, maxDepth: 2, maxConcurrentChildren: 3 });
    let open = 0;
    let peak = 0;
    let response = '';
    for await (const event of rlm.stream('c')) {
      if (event.type === 'subcall-start') peak = Math.max(peak, ++open);
      if (event.type === 'subcall-end') open--;
      if (event.type === 'run-end') response = event.result.response;
    }
    expect(response).toBe('abcdefg');
    expect(peak).toBe(3);
  });

  it('counts usage over the whole tree, per model, children included', async () => {
    const { languageModel } = models(
      (request) => (isChild(request) ? { content: repl('FINAL(llm_query("x"))'), usage: { inputTokens: 100, outputTokens: 10 } } : { content: repl('FINAL(rlm_query("t"))'), usage: { inputTokens: 1000, outputTokens: 50 } }),
      () => ({ content: 'leaf', usage: { inputTokens: 7, outputTokens: 3 } }),
    );
    const result = await new RLM({ model: 'root', subModel: 'sub', languageModel, maxDepth: 2 }).completion('c');
    expect(result.usage.byModel).toEqual({
      root: { calls: 2, inputTokens: 1100, outputTokens: 60, costUsd: null },
      sub: { calls: 1, inputTokens: 7, outputTokens: 3, costUsd: null },
    });
  });
});

describe('limits', () => {
  async function expectLimit(promise: Promise<unknown>, code: string) {
    const error = await rejectionOf(promise, RunLimitError);
    expect(error.code).toBe(code);
    return error;
  }

  it('maxTokens stops the tree and keeps the partial answer', async () => {
    const { languageModel } = models(() => ({ content: 'Working on it.\n' + repl('print(1)'), usage: { inputTokens: 400, outputTokens: 100 } }));
    const error = await expectLimit(new RLM({ model: 'root', languageModel, maxTokens: 1200 }).completion('c'), 'max_tokens');
    expect(error.partialAnswer).toContain('Working on it.');
    expect(error.usage?.inputTokens).toBe(1200);
    expect(error.message).toContain('1,500 tokens used');
  });

  it('maxBudgetUsd counts priced models', async () => {
    const { languageModel } = models(() => ({ content: repl('print(1)'), usage: { inputTokens: 1_000_000, outputTokens: 0 } }));
    const rlm = new RLM({ model: 'root', languageModel, maxBudgetUsd: 2.5, prices: { root: { inputPerMillion: 1, outputPerMillion: 1 } } });
    const error = await expectLimit(rlm.completion('c'), 'max_budget');
    expect(error.message).toContain('$3.0000 spent');
  });

  it('maxLlmCalls counts every model call in the tree', async () => {
    const { rootModel, subModel, languageModel } = models(() => repl('llm_query_batched(["a", "b", "c"])'), () => 'x');
    const error = await expectLimit(new RLM({ model: 'root', subModel: 'sub', languageModel, maxLlmCalls: 6 }).completion('c'), 'max_llm_calls');
    // Root, 3 sub-calls, root (its batch of 3 is refused: 1 call left), root: the 7th call is refused before it starts.
    expect(rootModel.calls.length + subModel.calls.length).toBe(6);
    expect(error.usage?.calls).toBeLessThanOrEqual(6);
  });

  it('maxErrors stops after that many failing iterations in a row', async () => {
    const { rootModel, languageModel } = models(() => repl('null.boom'));
    await expectLimit(new RLM({ model: 'root', languageModel, maxErrors: 3 }).completion('c'), 'max_errors');
    expect(rootModel.calls).toHaveLength(3);
  });

  it('maxTimeMs interrupts a block that waits on a slow sub-call', async () => {
    const { languageModel } = models([repl('print("started"); llm_query("slow")')], () => ({ content: 'late', delayMs: 10_000 }));
    const started = Date.now();
    await expectLimit(new RLM({ model: 'root', subModel: 'sub', languageModel, maxTimeMs: 400 }).completion('c'), 'max_time');
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it('maxTimeMs interrupts a block that computes (a limit hit mid-block)', async () => {
    const { languageModel } = models([repl('let n = 0; while (true) n++')]);
    const started = Date.now();
    await expectLimit(new RLM({ model: 'root', languageModel, maxTimeMs: 300, sandbox: { blockTimeoutMs: 30_000 } }).completion('c'), 'max_time');
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it('an AbortSignal cancels the run with the caller’s reason', async () => {
    const controller = new AbortController();
    const cancelled = new Error('user cancelled');
    // The caller gives up while the block waits on a slow sub-call.
    const slowSub = () => {
      controller.abort(cancelled);
      return { content: 'late', delayMs: 10_000 };
    };
    const { languageModel } = models([repl('llm_query("slow")')], slowSub);
    expect(await rejectionOf(new RLM({ model: 'root', subModel: 'sub', languageModel }).completion({ context: 'c', signal: controller.signal }), Error)).toBe(cancelled);
  });
});
