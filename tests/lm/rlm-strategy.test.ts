import { afterEach, describe, expect, it } from 'vitest';
import { RLM } from '../../src/index.js';
import { needleTask, rlmStrategyReply, startFakeOpenAIServer, type FakeOpenAIServer } from '../../src/testing.js';

// The scripted strategy upstream behind `rlm fake-server`: a real RLM run over real HTTP.

const servers: FakeOpenAIServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

async function strategyRlm() {
  const server = await startFakeOpenAIServer({ reply: rlmStrategyReply });
  servers.push(server);
  return { server, rlm: new RLM({ model: 'fake-rlm', baseURL: server.baseURL, maxIterations: 6 }) };
}

describe('rlmStrategyReply', () => {
  it('looks, asks every chunk with llm_query_batched, and answers a needle question with FINAL', async () => {
    const { server, rlm } = await strategyRlm();
    const task = needleTask(3);
    const result = await rlm.completion({ context: task.context, query: task.question });
    expect(result.response).toContain(task.answer);
    expect(result.iterations).toBe(3);
    const [look, ask] = result.trajectory.map((iteration) => iteration.codeBlocks[0]!);
    expect(look!.result.stdout).toMatch(/^string \| \d+ characters\n\w/);
    expect(ask!.code).toContain('llm_query_batched');
    const subCalls = server.requests.filter((request) => (request.body.messages as { role: string }[])[0]!.role !== 'system');
    expect(subCalls.length).toBeGreaterThan(3);
  });

  it('answers each of many needle tasks right, and says when the context lacks the answer', async () => {
    const { rlm } = await strategyRlm();
    for (const index of [0, 1, 17, 250]) {
      const task = needleTask(index);
      expect((await rlm.completion({ context: task.context, query: task.question })).response).toContain(task.answer);
    }
    const missing = needleTask(5);
    const result = await rlm.completion({ context: missing.context, query: 'What is the secret code of item 99999?' });
    expect(result.response).toBe('Not found in the context.');
  });
});
