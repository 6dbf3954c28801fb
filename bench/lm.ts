// LM layer benchmark: llm_query_batched from inside the sandbox against the fake OpenAI server
// (real HTTP, real openai client), and the overhead of one sequential llm_query.
import { LlmQueries } from '../src/engine/llm-queries.js';
import { routeHostCall } from '../src/engine/host-calls.js';
import { singleModelProvider } from '../src/lm/provider.js';
import OpenAI from 'openai';
import PQueue from 'p-queue';
import { OpenAIModel, Sandbox } from '../src/index.js';
import { ModelGateway } from '../src/lm/gateway.js';
import { ModelScheduler } from '../src/lm/scheduler.js';
import { UsageTracker } from '../src/lm/usage.js';
import { startServerProcess } from './fake-server.js';
import { median, ms, printTable, ratio } from './report.js';

const REFERENCE = { batchedRatio: 1.04, sequentialMs: 2.7 };

async function sandboxAgainst(baseURL: string, concurrency: number) {
  const gateway = new ModelGateway({ models: singleModelProvider(new OpenAIModel({ baseURL, maxRetries: 0 })), scheduler: new ModelScheduler(concurrency), usage: new UsageTracker() });
  const queries = new LlmQueries({ gateway, defaultModel: 'fake-model', maxToolIterations: 10 });
  return Sandbox.create({ onHostCall: (call, { signal }) => routeHostCall(call, signal, { queries, subcalls: [], toolCalls: [] }, {}), blockTimeoutMs: 600_000 });
}

async function timeBlock(sandbox: Sandbox, code: string): Promise<number> {
  const started = performance.now();
  const result = await sandbox.execute(code);
  if (result.error) throw new Error(result.error.stack);
  return performance.now() - started;
}

export async function runLmBench(): Promise<void> {
  const prompts = 1_000;
  const concurrency = 16;
  const latencyMs = 50;
  const slow = await startServerProcess(latencyMs);
  const fast = await startServerProcess(0);
  try {
    const batchedSandbox = await sandboxAgainst(slow.baseURL, concurrency);
    await timeBlock(batchedSandbox, 'llm_query_batched(Array.from({ length: 32 }, (_, i) => "warm " + i))');
    const batched: number[] = [];
    for (let run = 0; run < 3; run++) {
      batched.push(await timeBlock(batchedSandbox, `const r = llm_query_batched(Array.from({ length: ${prompts} }, (_, i) => "prompt " + i)); if (r.length !== ${prompts} || r.some((x) => x !== "ok")) throw new Error("bad batch")`));
    }
    await batchedSandbox.dispose();

    const sequentialSandbox = await sandboxAgainst(fast.baseURL, concurrency);
    const calls = 500;
    await timeBlock(sequentialSandbox, 'for (let i = 0; i < 20; i++) llm_query("warm")');
    const sequential: number[] = [];
    for (let run = 0; run < 3; run++) sequential.push((await timeBlock(sequentialSandbox, `for (let i = 0; i < ${calls}; i++) llm_query("q" + i)`)) / calls);
    await sequentialSandbox.dispose();

    // Baseline: the bare openai client with a p-queue, no rlm at all, against the same server.
    const client = new OpenAI({ baseURL: slow.baseURL, apiKey: 'unused', maxRetries: 0 });
    const queue = new PQueue({ concurrency });
    const bare = () => client.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'x' }] });
    await Promise.all(Array.from({ length: 32 }, () => queue.add(bare)));
    const baseline: number[] = [];
    for (let run = 0; run < 3; run++) {
      const started = performance.now();
      await Promise.all(Array.from({ length: prompts }, () => queue.add(bare)));
      baseline.push(performance.now() - started);
    }

    const ideal = Math.ceil(prompts / concurrency) * latencyMs;
    const wall = median(batched);
    const perCall = median(sequential);
    const bareWall = median(baseline);
    printTable(`LM layer (fake OpenAI server in its own process, real HTTP; median of 3 runs)`, ['metric', 'time', 'vs ideal', 'vs bare client', 'reference'], [
      [`ideal: ceil(${prompts}/${concurrency}) x ${latencyMs} ms`, ms(ideal), '1.00x', '', ''],
      [`bare openai client + p-queue, same ${prompts} requests (no rlm)`, ms(bareWall), ratio(bareWall, ideal), '1.00x', ''],
      [`llm_query_batched from the sandbox, ${prompts} prompts (target <= 1.02x ideal)`, ms(wall), ratio(wall, ideal), ratio(wall, bareWall), `${REFERENCE.batchedRatio.toFixed(2)}x ideal`],
      [`sequential llm_query, 0 ms latency, per call (${calls} calls)`, ms(perCall), '', '', `${REFERENCE.sequentialMs} ms (rlm = ${ratio(perCall, REFERENCE.sequentialMs)})`],
    ]);
  } finally {
    slow.close();
    fast.close();
  }
}
