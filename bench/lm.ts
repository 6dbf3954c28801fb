// LM layer benchmark: llm_query and llm_query_batched from inside the sandbox against the fake
// OpenAI server (its own process, real HTTP, real openai client), beside the bare openai client
// making the same calls in the same run, and beside the reference Python RLM when
// RLM_REFERENCE_PYTHON is set (see reference.ts).
import OpenAI from 'openai';
import PQueue from 'p-queue';
import { routeHostCall } from '../src/engine/host-calls.js';
import { LlmQueries } from '../src/engine/llm-queries.js';
import { OpenAIModel, Sandbox, type Isolation } from '../src/index.js';
import { ModelGateway } from '../src/lm/gateway.js';
import { singleModelProvider } from '../src/lm/provider.js';
import { ModelScheduler } from '../src/lm/scheduler.js';
import { UsageTracker } from '../src/lm/usage.js';
import { startServerProcess } from './fake-server.js';
import { referenceCell, referenceRatio, referenceSubcalls, type Reference } from './reference.js';
import { RUNS, LATENCY_MS, CONCURRENCY, median, ms, printTable, ratio } from './report.js';

const SEQUENTIAL_CALLS = 500;
const WARM_UP_CALLS = 20;
const BATCH_SIZES = [10, 100, 1_000];
const REFERENCE_BATCH = 100;
const TARGET = { overheadMs: 0.3, batchedRatio: 1.02 };

interface BatchFigures {
  prompts: number;
  idealMs: number;
  bareMs: number;
  rlmMs: number;
}

async function sandboxAgainst(baseURL: string, isolation: Isolation = 'isolate') {
  const gateway = new ModelGateway({ models: singleModelProvider(new OpenAIModel({ baseURL, maxRetries: 0 })), scheduler: new ModelScheduler(CONCURRENCY), usage: new UsageTracker() });
  const queries = new LlmQueries({ gateway, defaultModel: 'fake-model', maxToolIterations: 10 });
  return Sandbox.create({ onHostCall: (call, { signal }) => routeHostCall({ call, signal, scope: { queries, subcalls: [], toolCalls: [], services: {}, runSignal: signal } }), blockTimeoutMs: 600_000, isolation });
}

function bareClient(baseURL: string) {
  const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0 });
  return async () => {
    const completion = await client.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'x' }] });
    if (completion.choices[0]?.message.content !== 'ok') throw new Error('bad answer from the fake server');
  };
}

async function medianMs(action: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    const started = performance.now();
    await action();
    times.push(performance.now() - started);
  }
  return median(times);
}

async function runBlock(sandbox: Sandbox, code: string): Promise<void> {
  const result = await sandbox.execute(code);
  if (result.error) throw new Error(result.error.stack);
}

const sequentialBlock = (calls: number) => `for (let i = 0; i < ${calls}; i++) if (llm_query("q" + i) !== "ok") throw new Error("bad answer")`;
const batchedBlock = (prompts: number) =>
  `const r = llm_query_batched(Array.from({ length: ${prompts} }, (_, i) => "prompt " + i)); if (r.length !== ${prompts} || r.some((x) => x !== "ok")) throw new Error("bad batch")`;

/** Per call, one call at a time, against a server that answers at once: what each call costs. */
async function sequentialFigures(baseURL: string): Promise<{ rlmMs: number; processMs: number; bareMs: number }> {
  const perCall = async (isolation: Isolation) => {
    const sandbox = await sandboxAgainst(baseURL, isolation);
    await runBlock(sandbox, sequentialBlock(WARM_UP_CALLS));
    const perCallMs = (await medianMs(() => runBlock(sandbox, sequentialBlock(SEQUENTIAL_CALLS)))) / SEQUENTIAL_CALLS;
    await sandbox.dispose();
    return perCallMs;
  };
  const rlmMs = await perCall('isolate');
  const processMs = await perCall('process');

  const call = bareClient(baseURL);
  const sequentially = async (calls: number) => {
    for (let i = 0; i < calls; i++) await call();
  };
  await sequentially(WARM_UP_CALLS);
  const bareMs = (await medianMs(() => sequentially(SEQUENTIAL_CALLS))) / SEQUENTIAL_CALLS;
  return { rlmMs, processMs, bareMs };
}

async function batchedFigures(baseURL: string): Promise<BatchFigures[]> {
  const sandbox = await sandboxAgainst(baseURL);
  const call = bareClient(baseURL);
  const queue = new PQueue({ concurrency: CONCURRENCY });
  const bareBatch = (prompts: number) => Promise.all(Array.from({ length: prompts }, () => queue.add(call)));
  await runBlock(sandbox, batchedBlock(2 * CONCURRENCY));
  await bareBatch(2 * CONCURRENCY);
  const figures: BatchFigures[] = [];
  for (const prompts of BATCH_SIZES) {
    const rlmMs = await medianMs(() => runBlock(sandbox, batchedBlock(prompts)));
    const bareMs = await medianMs(() => bareBatch(prompts));
    figures.push({ prompts, idealMs: Math.ceil(prompts / CONCURRENCY) * LATENCY_MS, bareMs, rlmMs });
  }
  await sandbox.dispose();
  return figures;
}

const signedMs = (value: number) => `${value >= 0 ? '+' : ''}${ms(value)}`;

function printSequential(figures: { rlmMs: number; processMs: number; bareMs: number }, reference: Reference): void {
  const { rlmMs, processMs, bareMs } = figures;
  printTable(
    `Sequential llm_query (server answers at once; per call, median of ${RUNS} runs of ${SEQUENTIAL_CALLS}; reference = Python RLM, same server, same run)`,
    ['figure', 'rlm', 'baseline', 'overhead', 'rlm / baseline', 'target', 'reference', 'rlm / reference'],
    [
      [
        'llm_query from the sandbox, one call at a time',
        ms(rlmMs),
        `bare openai client, same calls: ${ms(bareMs)}`,
        signedMs(rlmMs - bareMs),
        ratio(rlmMs, bareMs),
        `overhead <= +${TARGET.overheadMs} ms`,
        referenceCell(reference, 'sequentialMsPerCall', ms),
        referenceRatio(rlmMs, reference, 'sequentialMsPerCall'),
      ],
      ['the same with --isolation process (a worker process per run)', ms(processMs), `bare openai client, same calls: ${ms(bareMs)}`, signedMs(processMs - bareMs), ratio(processMs, bareMs), '', '', ''],
    ],
  );
}

function printBatched(figures: BatchFigures[], reference: Reference): void {
  printTable(
    `llm_query_batched (${LATENCY_MS} ms latency, ${CONCURRENCY} in flight; ideal = ceil(n/${CONCURRENCY}) x ${LATENCY_MS} ms; bare = openai client + p-queue; median of ${RUNS}; reference = Python RLM, same server, same run)`,
    ['prompts', 'ideal', 'bare', 'rlm', 'rlm / ideal', 'rlm / bare', 'rlm over ideal, per prompt', 'bare over ideal, per prompt', 'target', 'reference', 'rlm / reference'],
    figures.map(({ prompts, idealMs, bareMs, rlmMs }) => {
      const measuredByReference = prompts === REFERENCE_BATCH;
      return [
        prompts.toLocaleString('en-US'),
        ms(idealMs),
        ms(bareMs),
        ms(rlmMs),
        ratio(rlmMs, idealMs),
        ratio(rlmMs, bareMs),
        signedMs((rlmMs - idealMs) / prompts),
        signedMs((bareMs - idealMs) / prompts),
        prompts === BATCH_SIZES.at(-1) ? `<= ${TARGET.batchedRatio.toFixed(2)}x ideal` : '',
        measuredByReference ? referenceCell(reference, 'batchedMs', ms) : '',
        measuredByReference ? referenceRatio(rlmMs, reference, 'batchedMs') : '',
      ];
    }),
  );
}

export async function runLmBench(): Promise<void> {
  const slow = await startServerProcess(LATENCY_MS);
  const fast = await startServerProcess(0);
  try {
    const sequential = await sequentialFigures(fast.baseURL);
    const batched = await batchedFigures(slow.baseURL);
    const reference = referenceSubcalls({ fastURL: fast.baseURL, slowURL: slow.baseURL, calls: SEQUENTIAL_CALLS, prompts: REFERENCE_BATCH });
    printSequential(sequential, reference);
    printBatched(batched, reference);
  } finally {
    slow.close();
    fast.close();
  }
}
