// Server benchmark: rlm serve as an OpenAI-compatible model, called with the official openai client
// over real HTTP at several concurrency levels. Each completion is an RLM run of two root-model
// calls around one sandbox block; the baseline makes the same two upstream calls with the bare
// client in the same run, so what remains is what rlm adds (HTTP facade, engine, sandbox).
import OpenAI from 'openai';
import { serve } from '../src/index.js';
import { startServerProcess } from './fake-server.js';
import { childPids, rssKb } from './processes.js';
import { ms, printTable, ratio } from './report.js';

const LATENCY_MS = 20;
const LEVELS = [
  { concurrency: 1, requests: 20 },
  { concurrency: 10, requests: 50 },
  { concurrency: 50, requests: 100 },
];
const WARM_UP_REQUESTS = 5;
const MODEL = 'fake-model';
const CONTEXT = 'Minutes: the launch review is on Tuesday at 10:00 in room 4; bring the test report.';
const QUESTION = 'When and where is the launch review?';
const ANSWER = 'Tuesday at 10:00 in room 4';
const CODE_REPLY = '```repl\nprint(context.slice(0, 60))\n```';
const REPL_OUTPUT = `REPL output:\n${CONTEXT.slice(0, 60)}`;
// Runs in the upstream's process: code first, the answer once the run has fed the output back.
// The system prompt itself mentions "REPL output", so only the other messages tell.
const ROOT_MODEL_SOURCE = `(request) => request.body.messages.some((message) => message.role !== 'system' && String(message.content).includes('REPL output'))
  ? ${JSON.stringify(`FINAL(${ANSWER})`)}
  : ${JSON.stringify(CODE_REPLY)}`;

interface Load {
  latencies: number[];
  wallMs: number;
}

/** `total` requests from `concurrency` callers, each sending its next as soon as the last is answered. */
async function closedLoop(total: number, concurrency: number, send: () => Promise<void>): Promise<Load> {
  const latencies: number[] = [];
  let sent = 0;
  const caller = async () => {
    while (sent < total) {
      sent++;
      const started = performance.now();
      await send();
      latencies.push(performance.now() - started);
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, caller));
  return { latencies, wallMs: performance.now() - started };
}

async function askRlm(client: OpenAI): Promise<void> {
  const completion = await client.chat.completions.create({
    model: MODEL,
    messages: [
      { role: 'system', content: CONTEXT },
      { role: 'user', content: QUESTION },
    ],
  });
  expectAnswer(completion.choices[0]?.message.content, ANSWER);
}

/** The two root-model calls of one RLM run, made directly: what a completion costs without rlm. */
async function askUpstreamTwice(client: OpenAI): Promise<void> {
  const question = { role: 'user' as const, content: QUESTION };
  const code = await client.chat.completions.create({ model: MODEL, messages: [question] });
  expectAnswer(code.choices[0]?.message.content, CODE_REPLY);
  const final = await client.chat.completions.create({
    model: MODEL,
    messages: [question, { role: 'assistant', content: CODE_REPLY }, { role: 'user', content: REPL_OUTPUT }],
  });
  expectAnswer(final.choices[0]?.message.content, `FINAL(${ANSWER})`);
}

// A benchmark of runs that fail fast would flatter rlm, so every answer is checked.
function expectAnswer(actual: string | null | undefined, expected: string): void {
  if (actual !== expected) throw new Error(`expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
}

/** Nearest-rank percentile: with 20 or 50 samples, p99 is the slowest. */
function percentile(values: number[], fraction: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.ceil(fraction * sorted.length) - 1]!;
}


/**
 * Samples resident memory every 50 ms: this process (the server) and its sandbox workers summed.
 * VmHWM would be simpler but never falls, so it could not tell one concurrency level from the last.
 */
function sampleMemory(): { stop(): { serverMb: number; workersMb: number; workers: number } } {
  const peak = { serverKb: 0, workersKb: 0, workers: 0 };
  const sample = () => {
    const workers = childPids(process.pid, 'sandbox-worker');
    peak.serverKb = Math.max(peak.serverKb, rssKb(process.pid));
    peak.workersKb = Math.max(peak.workersKb, workers.reduce((sum, pid) => sum + rssKb(pid), 0));
    peak.workers = Math.max(peak.workers, workers.length);
  };
  sample();
  const timer = setInterval(sample, 50);
  return {
    stop: () => {
      clearInterval(timer);
      sample();
      return { serverMb: peak.serverKb / 1024, workersMb: peak.workersKb / 1024, workers: peak.workers };
    },
  };
}

const mb = (value: number) => `${value.toFixed(0)} MB`;
const perSecond = (load: Load) => (load.latencies.length / load.wallMs) * 1000;

function row(concurrency: number, rlm: Load, bare: Load, memory: ReturnType<ReturnType<typeof sampleMemory>['stop']>): string[] {
  const latencyCells = (fraction: number) => {
    const [withRlm, without] = [percentile(rlm.latencies, fraction), percentile(bare.latencies, fraction)];
    return [ms(withRlm), ms(without), ms(withRlm - without), ratio(withRlm, without)];
  };
  return [
    String(concurrency),
    String(rlm.latencies.length),
    perSecond(rlm).toFixed(1),
    perSecond(bare).toFixed(1),
    ...latencyCells(0.5),
    ...latencyCells(0.99),
    mb(memory.serverMb),
    mb(memory.workersMb),
    String(memory.workers),
  ];
}

export async function runServerBench(): Promise<void> {
  const upstream = await startServerProcess(LATENCY_MS, ROOT_MODEL_SOURCE);
  // Above the largest level, so no request is turned away with 429 (the default allows 32).
  const maxConcurrentRuns = Math.max(...LEVELS.map((level) => level.concurrency));
  const server = await serve({ port: 0, maxConcurrentRuns, run: { baseURL: upstream.baseURL, apiKey: 'unused' } });
  try {
    const rlmClient = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const bareClient = new OpenAI({ baseURL: upstream.baseURL, apiKey: 'unused', maxRetries: 0 });
    await closedLoop(WARM_UP_REQUESTS, 1, () => askRlm(rlmClient));
    await closedLoop(WARM_UP_REQUESTS, 1, () => askUpstreamTwice(bareClient));
    const rows: string[][] = [];
    for (const { concurrency, requests } of LEVELS) {
      const bare = await closedLoop(requests, concurrency, () => askUpstreamTwice(bareClient));
      const memory = sampleMemory();
      const rlm = await closedLoop(requests, concurrency, () => askRlm(rlmClient));
      rows.push(row(concurrency, rlm, bare, memory.stop()));
    }
    printTable(
      `Server: rlm serve, openai client over HTTP (each completion = 2 upstream calls of ${LATENCY_MS} ms + 1 sandbox block; bare = the same 2 calls with the bare openai client, same run; p99 by nearest rank)`,
      ['concurrency', 'requests', 'rlm completions/s', 'bare pairs/s', 'p50 rlm', 'p50 bare', 'p50 added', 'p50 ratio', 'p99 rlm', 'p99 bare', 'p99 added', 'p99 ratio', 'peak RSS server', 'peak RSS workers', 'peak workers'],
      rows,
    );
  } finally {
    await server.close(0);
    upstream.close();
  }
}
