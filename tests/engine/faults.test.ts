import { afterEach, describe, expect, it } from 'vitest';
import { OpenAIModel, RLM, RunFailedError, RunLimitError } from '../../src/index.js';
import { startFakeOpenAIServer, type FakeOpenAIServer, type FakeReply, type FakeRequest } from '../../src/testing.js';
import { rejectionOf } from '../rejection.js';
import { repl } from '../repl.js';

// Whole runs over real HTTP against a server that misbehaves on purpose: a failure is never
// passed off as an answer.

const servers: FakeOpenAIServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

/** Root model "root" answers from `root` in order; sub-model "sub" from `sub(prompt)`. */
async function rlmAgainst(root: FakeReply[], sub: (prompt: string) => FakeReply, options: { stream: boolean; maxIterations?: number }) {
  const rootReplies = [...root];
  const server = await startFakeOpenAIServer({
    reply: (request: FakeRequest) => {
      if (request.body.model === 'sub') return sub(String((request.body.messages as { content: string }[]).at(-1)!.content));
      return rootReplies.shift() ?? { status: 500, error: { message: 'no more root replies' } };
    },
  });
  servers.push(server);
  const languageModel = new OpenAIModel({ baseURL: server.baseURL, stream: options.stream, maxRetries: 2, maxRetryDelayMs: 10, idleTimeoutMs: 2_000 });
  const rlm = new RLM({
    model: 'root',
    subModel: 'sub',
    languageModel,
    maxIterations: options.maxIterations ?? 5,
    prices: { root: { inputPerMillion: 1_000, outputPerMillion: 1_000 } },
  });
  return { rlm, server };
}

const failureOf = (promise: Promise<unknown>) => rejectionOf(promise, RunFailedError);

describe.each([false, true])('the root model misbehaves (stream: %s)', (stream) => {
  it('fails the run on an empty reply instead of answering with nothing', async () => {
    const { rlm } = await rlmAgainst([repl('print(1)'), { fault: 'null-content' }], () => 'x', { stream });
    const failure = await failureOf(rlm.completion('c'));
    expect(failure.code).toBe('model_error');
    expect(failure.message).toMatch(/empty reply/);
    // The failed run still says what it spent: the first, priced, root call.
    expect(failure.usage?.calls).toBe(1);
    expect(failure.usage?.costUsd).toBeGreaterThan(0);
  });

  it('retries a reply cut off in transit, and answers', async () => {
    const cut: FakeReply = stream ? { fault: 'stream-cut', content: repl('FINAL("wrong")') } : { fault: 'drop' };
    const { rlm, server } = await rlmAgainst([repl('print(1)'), cut, 'FINAL(right)'], () => 'x', { stream });
    expect((await rlm.completion('c')).response).toBe('right');
    expect(server.requests).toHaveLength(3);
  });

  it('fails when every attempt is cut, never taking half a reply as the answer', async () => {
    const cut: FakeReply = stream ? { fault: 'stream-cut', content: 'FINAL(half of an answer that goes on)' } : { fault: 'stall-after-headers' };
    const { rlm } = await rlmAgainst([repl('print(1)'), cut, cut, cut], () => 'x', { stream });
    const failure = await failureOf(rlm.completion('c'));
    expect(failure.message).toMatch(/ended early|stalled/);
    expect(failure.partialAnswer).toBeUndefined();
  });
});

describe.each([false, true])('sub-models misbehave (stream: %s)', (stream) => {
  it('gives llm_query a ModelError the code can catch', async () => {
    const code = 'try { llm_query("empty") } catch (error) { print(error.name, "|", error.message) }';
    const { rlm } = await rlmAgainst([repl(code), 'FINAL(handled)'], () => ({ fault: 'null-content' }), { stream });
    const result = await rlm.completion('c');
    expect(result.response).toBe('handled');
    expect(result.trajectory[0]!.codeBlocks[0]!.result.stdout).toMatch(/^ModelError \| The model returned an empty reply/);
  });

  it('marks only the failed items of a batch', async () => {
    const code = 'const answers = llm_query_batched(["fine", "empty", "choiceless"]); print(JSON.stringify(answers))';
    const sub = (prompt: string): FakeReply => (prompt === 'fine' ? 'ok' : { fault: prompt === 'empty' ? 'null-content' : 'empty-choices' });
    const { rlm } = await rlmAgainst([repl(code), 'FINAL(done)'], sub, { stream });
    const result = await rlm.completion('c');
    const answers = JSON.parse(result.trajectory[0]!.codeBlocks[0]!.result.stdout) as string[];
    expect(answers[0]).toBe('ok');
    expect(answers[1]).toMatch(/^Error: ModelError: The model returned an empty reply/);
    expect(answers[2]).toMatch(/^Error: ModelError: The model server returned no choices/);
  });
});

describe('honest partial and forced answers', () => {
  it('unwraps FINAL(...) in the forced answer', async () => {
    const { rlm } = await rlmAgainst([repl('print(1)'), 'FINAL(the late answer)'], () => 'x', { stream: false, maxIterations: 1 });
    const result = await rlm.completion('c');
    expect(result).toMatchObject({ response: 'the late answer', forced: true });
  });

  it('looks FINAL_VAR(...) up in the forced answer', async () => {
    const { rlm } = await rlmAgainst([repl('var found = "from a variable"'), 'FINAL_VAR(found)'], () => 'x', { stream: false, maxIterations: 1 });
    expect((await rlm.completion('c')).response).toBe('from a variable');
  });

  it('never prints a code block as the forced answer', async () => {
    const { rlm } = await rlmAgainst([repl('print(1)'), repl('print(2)')], () => 'x', { stream: false, maxIterations: 1 });
    const failure = await failureOf(rlm.completion('c'));
    expect(failure).toBeInstanceOf(RunLimitError);
    expect(failure.code).toBe('max_iterations');
    expect(failure.partialAnswer).toBeUndefined();
  });

  it('never offers a FINAL_VAR(...) line as the partial answer', async () => {
    const { rlm } = await rlmAgainst([repl('var found; throw new Error("no")'), 'Almost there.\nFINAL_VAR(found)'], () => 'x', { stream: false, maxIterations: 1 });
    const failure = await failureOf(rlm.completion('c'));
    expect(failure.code).toBe('max_iterations');
    expect(failure.partialAnswer).toBe('Almost there.');
  });

  it('keeps the prose of the last reply as the partial answer, without its code', async () => {
    const { rlm } = await rlmAgainst(['Revenue grew 12% so far.\n' + repl('print(1)'), { status: 400, error: { message: 'bad request' } }], () => 'x', {
      stream: false,
    });
    const failure = await failureOf(rlm.completion('c'));
    expect(failure.partialAnswer).toBe('Revenue grew 12% so far.');
    expect(failure.message).toMatch(/HTTP 400/);
  });
});
