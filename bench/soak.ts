// Soak benchmark: `rlm serve` (the real binary, a child process) under load against an upstream
// that fails a share of its requests in the ways real servers and proxies do (500, 429, dropped
// connections, malformed bodies, cut and stalled replies, 200s carrying an error, empty choices).
// The upstream is the strategy upstream of rlm/testing, so every answer can be checked: each
// completion asks for the secret code of a different item hidden in its own context. The same
// soak with no faults, in the same run, is the baseline.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { packageRoot } from '../src/paths.js';
import { needleTask, rlmStrategyReply, startFakeOpenAIServer } from '../src/testing.js';
import { isRunning } from '../tests/processes.js';
import { printTable } from './report.js';
import { childPids, rssKb } from './processes.js';

const BIN = join(packageRoot(), 'bin', 'rlm.js');
const setting = (name: string, fallback: number) => (process.env[name] ? Number(process.env[name]) : fallback);
const COMPLETIONS = setting('RLM_SOAK_COMPLETIONS', 1_000);
const BASELINE_COMPLETIONS = setting('RLM_SOAK_BASELINE_COMPLETIONS', Math.min(200, COMPLETIONS));
const CONCURRENCY = setting('RLM_SOAK_CONCURRENCY', 16);
const FAULT_RATE = setting('RLM_SOAK_FAULT_RATE', 0.1);
// Short, so the stalls among the faults cost a second each rather than two minutes.
const IDLE_TIMEOUT_S = 1;
const SEED = 2026;

interface Tally {
  right: number;
  wrong: number;
  /** Error responses, and among them those that are not an OpenAI error object. */
  errors: number;
  malformedErrors: number;
  samples: Map<string, number>;
}

interface Soak {
  completions: number;
  faultRate: number;
  tally: Tally;
  wallMs: number;
  upstreamRequests: number;
  faults: Record<string, number>;
  rssStartKb: number;
  rssEndKb: number;
  childrenAtShutdown: number;
  leftAfterExit: number;
  exitCode: number | null;
}

/** `rlm serve` as a user starts it, pointed at `baseURL`; resolves once it listens. */
async function startServe(baseURL: string): Promise<{ child: ChildProcess; url: string }> {
  const args = ['serve', '--base-url', baseURL, '--port', '0', '--idle-timeout', String(IDLE_TIMEOUT_S), '--max-concurrent-runs', String(CONCURRENCY * 2)];
  const child = spawn(process.execPath, [BIN, ...args], { env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp' }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      const match = /serving an OpenAI-compatible API at (\S+)\/v1/.exec(stderr);
      if (match) resolve(match[1]!);
    });
    child.once('exit', () => reject(new Error(`rlm serve exited: ${stderr}`)));
  });
  return { child, url };
}

/** One chat completion for needle task `index`, judged: right, wrong, or an error response (and its shape). */
async function complete(url: string, index: number, tally: Tally): Promise<void> {
  const task = needleTask(index);
  const body = JSON.stringify({ model: 'fake-rlm', messages: [{ role: 'system', content: task.context }, { role: 'user', content: task.question }] });
  let status = 0;
  let text = '';
  try {
    const response = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    status = response.status;
    text = await response.text();
  } catch (error) {
    text = `no response: ${(error as Error).message}`;
  }
  const reply = parsed(text) as { choices?: { message?: { content?: unknown } }[]; error?: { message?: unknown; type?: unknown } } | undefined;
  const content = reply?.choices?.[0]?.message?.content;
  if (status === 200 && typeof content === 'string') {
    if (content.includes(task.answer)) tally.right++;
    else {
      tally.wrong++;
      count(tally.samples, `wrong: ${content.slice(0, 120)}`);
    }
    return;
  }
  tally.errors++;
  const isOpenAIError = typeof reply?.error?.message === 'string' && typeof reply.error.type === 'string';
  if (!isOpenAIError) tally.malformedErrors++;
  count(tally.samples, `${status} ${isOpenAIError ? String(reply!.error!.message) : text}`.slice(0, 160));
}

function parsed(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function count(counts: Map<string, number>, key: string): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
}

/** `total` completions from `CONCURRENCY` callers, each sending its next as soon as the last is answered. */
async function load(url: string, first: number, total: number, tally: Tally): Promise<number> {
  let next = first;
  const caller = async () => {
    while (next < first + total) await complete(url, next++, tally);
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, caller));
  return performance.now() - started;
}


async function soak(completions: number, faultRate: number): Promise<Soak> {
  const upstream = await startFakeOpenAIServer({ reply: rlmStrategyReply, faultRate, seed: SEED });
  const { child, url } = await startServe(upstream.baseURL);
  const pid = child.pid!;
  try {
    // A first wave loads the engine and fills the worker pool: the start figures come after it.
    const warmUp: Tally = { right: 0, wrong: 0, errors: 0, malformedErrors: 0, samples: new Map() };
    await load(url, 1_000_000, CONCURRENCY, warmUp);
    const before = { requests: upstream.requests.length, faults: { ...upstream.faultsInjected }, rssKb: rssKb(pid) };
    const tally: Tally = { right: 0, wrong: 0, errors: 0, malformedErrors: 0, samples: new Map() };
    const wallMs = await load(url, 0, completions, tally);
    const faults = Object.fromEntries(Object.entries(upstream.faultsInjected).map(([kind, total]) => [kind, total - (before.faults[kind] ?? 0)]));
    const rssEndKb = rssKb(pid);
    const children = childPids(pid);
    child.kill('SIGTERM');
    const [exitCode] = (await once(child, 'exit')) as [number | null];
    // Workers that outlive the server are orphans: reparented, but still running.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const leftAfterExit = children.filter(isRunning).length;
    const upstreamRequests = upstream.requests.length - before.requests;
    return { completions, faultRate, tally, wallMs, upstreamRequests, faults, rssStartKb: before.rssKb, rssEndKb, childrenAtShutdown: children.length, leftAfterExit, exitCode };
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    await upstream.close();
  }
}

const percent = (part: number, whole: number) => `${((part / whole) * 100).toFixed(2)}%`;
const mb = (kb: number) => `${(kb / 1024).toFixed(0)} MB`;

function row(result: Soak): string[] {
  const { tally, completions } = result;
  const injected = Object.values(result.faults).reduce((sum, value) => sum + value, 0);
  return [
    result.faultRate === 0 ? 'none (baseline)' : `${(result.faultRate * 100).toFixed(0)}% assorted`,
    String(completions),
    percent(tally.right, completions),
    percent(tally.wrong, completions),
    percent(tally.errors, completions),
    String(tally.malformedErrors),
    ((completions / result.wallMs) * 1000).toFixed(1),
    String(result.upstreamRequests),
    `${injected} (${percent(injected, result.upstreamRequests)})`,
    `${mb(result.rssStartKb)} / ${mb(result.rssEndKb)}`,
    String(result.childrenAtShutdown),
    String(result.leftAfterExit),
    String(result.exitCode),
  ];
}

export async function runSoakBench(): Promise<void> {
  const baseline = await soak(BASELINE_COMPLETIONS, 0);
  const faulted = await soak(COMPLETIONS, FAULT_RATE);
  printTable(
    `Soak: rlm serve (child process, --idle-timeout ${IDLE_TIMEOUT_S}) under ${CONCURRENCY} concurrent needle questions, upstream failing a share of requests (seed ${SEED}); target with faults: >= 99.9% right, <= 1% errors, every error an OpenAI error object, nothing left running`,
    ['upstream faults', 'completions', 'right', 'wrong', 'errors', 'errors not OpenAI-shaped', 'completions/s', 'upstream requests', 'faults injected', 'server RSS start / end', 'children at shutdown', 'left after exit', 'exit code'],
    [row(baseline), row(faulted)],
  );
  console.log(`faults injected by kind: ${Object.entries(faulted.faults).map(([kind, total]) => `${kind} ${total}`).join(', ')}`);
  for (const result of [baseline, faulted]) {
    for (const [sample, times] of result.tally.samples) console.log(`  ${result.faultRate === 0 ? 'baseline' : 'faulted'}: ${times}x ${sample}`);
  }
}
