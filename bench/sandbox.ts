// Sandbox benchmark: start-up, calls from model code to the host, memory, context loading. Every
// figure sits beside a floor measured in the same run (see floors.ts); context loading also beside
// the reference Python RLM when RLM_REFERENCE_PYTHON is set (see reference.ts).
import { Sandbox } from '../src/index.js';
import { workerPool } from '../src/sandbox/pool.js';
import { bareIsolateMs, EchoChild, fileRoundTripMs, procStatusMb } from './floors.js';
import { referenceCell, referenceContextLoad, referenceRatio } from './reference.js';
import { RUNS, median, ms, printTable, ratio } from './report.js';

const STARTS = 5;
const CALLS = 10_000;
const CALLS_IN_FLIGHT = 1_000;
const CONTEXT_SIZES_MB = [1, 10, 100];
const REFERENCE_CONTEXT_MB = 10;
const TARGET = { warmStartMs: 20, roundTripMs: 0.25, context100MbMs: 150 };
const CONTEXT_LINE = 'The quick brown fox jumps over the lazy dog. 0123456789\n';

const mb = (value: number) => `${value.toFixed(0)} MB`;
const count = (value: number) => value.toLocaleString('en-US');

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

async function medianOf(runs: number, measure: () => Promise<number>): Promise<number> {
  const values: number[] = [];
  for (let run = 0; run < runs; run++) values.push(await measure());
  return median(values);
}

/** Time per call of one block of `code`, which makes `calls` host calls. */
async function perCallMs(sandbox: Sandbox, code: string, calls: number): Promise<number> {
  const started = performance.now();
  const result = await sandbox.execute(code);
  if (result.error) throw new Error(result.error.stack);
  return (performance.now() - started) / calls;
}

async function idleWorkerMb(): Promise<number> {
  const sandbox = await Sandbox.create();
  await sandbox.execute('1');
  const resident = procStatusMb(sandbox.processId!, 'VmRSS');
  await sandbox.dispose();
  return resident;
}

async function hostCallFigures() {
  const sandbox = await Sandbox.create({ onHostCall: () => 'ok' });
  await sandbox.execute('for (let i = 0; i < 100; i++) llm_query("warm-up")');
  const roundTrip = await medianOf(RUNS, () => perCallMs(sandbox, `for (let i = 0; i < ${CALLS}; i++) llm_query("x")`, CALLS));
  await sandbox.setTools([{ type: 'function', function: { name: 'lookup' } }], { asyncTools: ['lookup'] });
  const awaited = await medianOf(RUNS, () => perCallMs(sandbox, `for (let i = 0; i < ${CALLS}; i++) await tools.lookup({})`, CALLS));
  const together = await medianOf(RUNS, () =>
    perCallMs(sandbox, `await Promise.all(Array.from({ length: ${CALLS_IN_FLIGHT} }, () => tools.lookup({})))`, CALLS_IN_FLIGHT),
  );
  await sandbox.dispose();
  return { roundTrip, awaited, together };
}

async function echoFloors() {
  const starts: number[] = [];
  for (let i = 0; i < STARTS; i++) {
    const { echo, startMs } = await EchoChild.start();
    starts.push(startMs);
    echo.stop();
  }
  const { echo } = await EchoChild.start();
  await echo.oneAtATimeMs(100);
  const oneAtATime = await medianOf(RUNS, () => echo.oneAtATimeMs(CALLS));
  const allInFlight = await medianOf(RUNS, () => echo.allInFlightMs(CALLS_IN_FLIGHT));
  const residentMb = echo.residentMb();
  echo.stop();
  return { startMs: median(starts), oneAtATime, allInFlight, residentMb };
}

function contextText(megabytes: number): string {
  return CONTEXT_LINE.repeat(Math.ceil((megabytes * 1_000_000) / CONTEXT_LINE.length));
}

/** Load times per size, and the worker's peak resident memory once the largest is loaded. */
async function contextLoads(): Promise<{ rows: { megabytes: number; loadMs: number; floorMs: number }[]; workerPeakMb: number }> {
  const sandbox = await Sandbox.create({ memoryLimitMb: 1024 });
  const rows = [];
  for (const megabytes of CONTEXT_SIZES_MB) {
    const text = contextText(megabytes);
    const floorMs = fileRoundTripMs(text, RUNS);
    const loadMs = await medianOf(RUNS, async () => {
      const started = performance.now();
      await sandbox.setContext(text);
      return performance.now() - started;
    });
    const check = await sandbox.execute('context.length');
    if (check.stdout.trim() !== String(text.length)) throw new Error(`context check failed: ${check.stdout}`);
    rows.push({ megabytes, loadMs, floorMs });
  }
  const workerPeakMb = procStatusMb(sandbox.processId!, 'VmHWM');
  await sandbox.dispose();
  return { rows, workerPeakMb };
}

export async function runSandboxBench(): Promise<void> {
  const cold = await medianOf(STARTS, () => startUp(false));
  const warm = await medianOf(STARTS, () => startUp(true));
  const isolate = bareIsolateMs(STARTS);
  const echo = await echoFloors();
  const calls = await hostCallFigures();
  const idleMb = await idleWorkerMb();
  const contexts = await contextLoads();
  const reference = await referenceContextLoad(REFERENCE_CONTEXT_MB);

  printTable(`Sandbox (median of ${RUNS} runs, start-ups of ${STARTS}; baselines measured in this run)`, ['figure', 'rlm', 'baseline', 'rlm / baseline', 'target'], [
    ['new sandbox, cold (spawn worker + first block)', ms(cold), `bare node child, spawn to first echo: ${ms(echo.startMs)}`, ratio(cold, echo.startMs), ''],
    ['new sandbox, warm worker (create + first block)', ms(warm), `first isolate of a bare process (create + context + eval): ${ms(isolate)}`, ratio(warm, isolate), `<= ${TARGET.warmStartMs} ms`],
    [`llm_query round trip, sandbox -> host (${count(CALLS)} calls)`, ms(calls.roundTrip), `1-byte pipe echo, one at a time: ${ms(echo.oneAtATime)}`, ratio(calls.roundTrip, echo.oneAtATime), `<= ${TARGET.roundTripMs} ms`],
    [`async tool call, awaited one at a time (${count(CALLS)})`, ms(calls.awaited), `1-byte pipe echo, one at a time: ${ms(echo.oneAtATime)}`, ratio(calls.awaited, echo.oneAtATime), ''],
    [`async tool calls, ${count(CALLS_IN_FLIGHT)} in one Promise.all (per call)`, ms(calls.together), `${count(CALLS_IN_FLIGHT)} 1-byte echoes in flight, per byte: ${ms(echo.allInFlight)}`, ratio(calls.together, echo.allInFlight), ''],
    ['idle sandbox worker, resident (create + one trivial block)', mb(idleMb), `bare node child, resident: ${mb(echo.residentMb)}`, ratio(idleMb, echo.residentMb), ''],
    [`sandbox worker, peak resident after ${CONTEXT_SIZES_MB.at(-1)} MB contexts`, mb(contexts.workerPeakMb), `idle sandbox worker: ${mb(idleMb)}`, ratio(contexts.workerPeakMb, idleMb), ''],
  ]);

  printTable(
    `Context load, string (median of ${RUNS}; baseline = the text written to tmpfs and read back in this process; reference = Python RLM, same run)`,
    ['size', 'rlm', 'rlm per MB', 'baseline', 'rlm / baseline', 'target', 'reference', 'rlm / reference'],
    contexts.rows.map(({ megabytes, loadMs, floorMs }) => {
      const measuredByReference = megabytes === REFERENCE_CONTEXT_MB;
      return [
        `${megabytes} MB`,
        ms(loadMs),
        ms(loadMs / megabytes),
        ms(floorMs),
        ratio(loadMs, floorMs),
        megabytes === 100 ? `<= ${TARGET.context100MbMs} ms` : '',
        measuredByReference ? referenceCell(reference, 'contextLoadMs', ms) : '',
        measuredByReference ? referenceRatio(loadMs, reference, 'contextLoadMs') : '',
      ];
    }),
  );
}
