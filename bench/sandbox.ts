// Sandbox benchmark: start-up, host-call round trip, context loading, memory.
// Prints figures beside the targets and the reference Python RLM runtime measured on this machine kind.
import { readFileSync } from 'node:fs';
import { Sandbox } from '../src/index.js';
import { workerPool } from '../src/sandbox/pool.js';
import { median, ms, printTable, ratio } from './report.js';

const REFERENCE = { roundTripMs: 2.7, context100MbMs: 685 };
const TARGET = { roundTripMs: 0.25, context100MbMs: 150, warmStartMs: 20 };

function peakRssMb(pid: number | undefined): number {
  if (!pid) return Number.NaN;
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+)/.exec(status)?.[1]) / 1024;
}

async function startUp(warm: boolean): Promise<number> {
  if (warm) await Sandbox.prewarm();
  else workerPool.drain();
  const started = performance.now();
  const sandbox = await Sandbox.create();
  await sandbox.execute('1');
  const elapsed = performance.now() - started;
  await sandbox.dispose();
  return elapsed;
}

/** Median time per call of three runs of `code`, which makes `calls` host calls. */
async function perCallMs(sandbox: Sandbox, code: string, calls: number): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < 3; i++) {
    const started = performance.now();
    const result = await sandbox.execute(code);
    if (result.error) throw new Error(result.error.stack);
    times.push((performance.now() - started) / calls);
  }
  return median(times);
}

export async function runSandboxBench(): Promise<void> {
  const cold: number[] = [];
  const warm: number[] = [];
  for (let i = 0; i < 5; i++) cold.push(await startUp(false));
  for (let i = 0; i < 5; i++) warm.push(await startUp(true));

  const calls = 10_000;
  const batchCalls = 1_000;
  const sandbox = await Sandbox.create({ memoryLimitMb: 1024, onHostCall: () => 'ok' });
  await sandbox.execute('for (let i = 0; i < 100; i++) llm_query("warm-up")');
  const roundTrips: number[] = [];
  for (let i = 0; i < 3; i++) {
    const started = performance.now();
    const result = await sandbox.execute(`for (let i = 0; i < ${calls}; i++) llm_query("x")`);
    if (result.error) throw new Error(result.error.stack);
    roundTrips.push((performance.now() - started) / calls);
  }

  await sandbox.setTools([{ type: 'function', function: { name: 'lookup' } }], { asyncTools: ['lookup'] });
  const awaited = await perCallMs(sandbox, `for (let i = 0; i < ${calls}; i++) await tools.lookup({})`, calls);
  const together = await perCallMs(sandbox, `await Promise.all(Array.from({ length: ${batchCalls} }, () => tools.lookup({})))`, batchCalls);

  const contextRows: string[][] = [];
  let context100 = Number.NaN;
  for (const megabytes of [1, 10, 100]) {
    const line = 'The quick brown fox jumps over the lazy dog. 0123456789\n';
    const text = line.repeat(Math.ceil((megabytes * 1_000_000) / line.length));
    const times: number[] = [];
    for (let i = 0; i < 3; i++) {
      const started = performance.now();
      await sandbox.setContext(text);
      times.push(performance.now() - started);
    }
    const check = await sandbox.execute('context.length');
    if (check.stdout.trim() !== String(text.length)) throw new Error(`context check failed: ${check.stdout}`);
    const time = median(times);
    if (megabytes === 100) context100 = time;
    contextRows.push([`context load ${megabytes} MB (string)`, ms(time), megabytes === 100 ? `<= ${TARGET.context100MbMs} ms` : '', megabytes === 100 ? `${REFERENCE.context100MbMs} ms` : '', megabytes === 100 ? ratio(time, REFERENCE.context100MbMs) : '']);
  }
  const workerPeak = peakRssMb(sandbox.processId);
  await sandbox.dispose();

  const roundTrip = median(roundTrips);
  printTable('Sandbox (median of runs; reference = Python RLM runtime on this machine kind)', ['metric', 'rlm', 'target', 'reference', 'rlm / reference'], [
    ['new sandbox, cold (spawn worker + first block)', ms(median(cold)), '', '', ''],
    ['new sandbox, warm worker (create + first block)', ms(median(warm)), `<= ${TARGET.warmStartMs} ms`, '', ''],
    [`sandbox->host round trip (${calls.toLocaleString('en-US')} llm_query calls)`, ms(roundTrip), `<= ${TARGET.roundTripMs} ms`, `${REFERENCE.roundTripMs} ms`, ratio(roundTrip, REFERENCE.roundTripMs)],
    [`async tool call, awaited one at a time (${calls.toLocaleString('en-US')})`, ms(awaited), '', '', ''],
    [`async tool calls, ${batchCalls.toLocaleString('en-US')} in one Promise.all (per call)`, ms(together), '', '', ''],
    ...contextRows,
    ['peak RSS, worker with 100 MB context', `${workerPeak.toFixed(0)} MB`, '', '', ''],
    ['peak RSS, host process', `${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MB`, '', '', ''],
  ]);
  void context100;
}
