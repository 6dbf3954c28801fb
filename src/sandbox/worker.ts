// The sandbox worker: a child process that owns one isolated-vm isolate. It is a separate process
// because some allocation bombs drive V8 into its fatal-error path, where the only way out is to
// kill the process; the host survives and starts a fresh worker.
//
// Blocks run with `runSync` on this process's main thread, so a host call from model code is a plain
// synchronous function call here (about 3 us) that writes a frame to the host and waits for the
// reply on the same thread. Waking a sleeping process costs over 100 us on small VMs, so the wait
// spins briefly on the (non-blocking) command descriptor: quick host answers (tools, caches) return
// without a wake-up. Then it blocks on a separate doorbell descriptor, which the host rings with
// one byte after every reply: slow answers (model calls) cost no CPU and no polling delay.
//
// Calls to asynchronous tools do not wait: the request goes out and model code gets a promise.
// When the block has run until it awaits and such calls are outstanding, the worker tells the host
// it is waiting, reads the next reply, and hands it to the prelude, which lets the block go on
// (awaitAsyncCalls). The block's time limit counts only the time spent running it.
import fs from 'node:fs';
import net from 'node:net';
import ivm from 'isolated-vm';
import type { z } from 'zod';
import { DEFAULTS } from '../defaults.js';
import { describeError } from '../errors.js';
import { encodeFrame, FrameDecoder } from './framing.js';
import { isolateErrorText, isTimeoutText } from './isolate-errors.js';
import { startOrphanWatchdog } from './orphan-watchdog.js';
import type { HostReply, WorkerCommand, WorkerEvent } from './protocol.js';
import { MAX_REJECTED_FINALS, problemsOf, problemsText, REJECTED_ANSWER_CHARS, type RejectedFinal } from './schema-problems.js';
import { BLOCK_FILENAME, clip, PRELUDE_FILENAME, type PreludeController } from './shared.js';

/**
 * The in-isolate prelude: sandbox/prelude.ts (with sandbox/primordials.ts, inspect.ts, json.ts),
 * bundled by scripts/build.mjs into this string constant of dist/sandbox-worker.js.
 */
declare const __RLM_PRELUDE_SOURCE__: string;

const TO_HOST_FD = 3;
const FROM_HOST_FD = 4;
const DOORBELL_FD = 5;
/**
 * How long a host call spins before it sleeps on the doorbell. Answers the host has at hand come
 * within it (a round trip costs about 0.12 ms either way); a model call takes longer, and spinning
 * through it (2 ms, before) kept a core busy that the host and the model server needed: sequential
 * llm_query cost +1.65 ms per call over the bare client with a 2 ms spin, +0.97 ms with this one.
 */
const SPIN_MS = 0.2;
/** Share of the heap limit still in use after a block and a full collection that counts as full. */
const HEAP_FULL_SHARE = 0.9;
/** Large replies (batched answers, big documents) arrive in few reads. */
const READ_BYTES = 1 << 20;

const decoder = new FrameDecoder<WorkerCommand>();
const deferred: WorkerCommand[] = [];
const sleepCell = new Int32Array(new SharedArrayBuffer(4));
const readBuffer = Buffer.allocUnsafe(READ_BYTES);
const doorbellBuffer = Buffer.allocUnsafe(64);

let isolate: ivm.Isolate | undefined;
let context: ivm.Context | undefined;
/** A reference to each method of the prelude's controller, typed by the prelude's own signature. */
type PreludeReferences = { [Method in keyof PreludeController]: ivm.Reference<PreludeController[Method]> };
let controller: PreludeReferences | undefined;
let nextHostCallId = 1;
let maxHostCallChars = 0;
/** Asynchronous calls of the running block whose replies the prelude has not been given yet. */
const asyncCalls = new Set<number>();
/** Replies to asynchronous calls that arrived while a synchronous call was waiting for its own. */
const earlyReplies = new Map<number, string>();
/** Time model code spent in calls to this process (the isolate's timeout is paused meanwhile). */
let timeOutsideIsolateMs = 0;
/** The output schema's validator and what a refused FINAL throws (see setOutputSchema). */
let outputCheck: { validator: z.ZodType; refusal: string } | undefined;
/** The running block's time: checks of its FINAL values spend it. */
let runningBudget: ExecutionBudget | undefined;
/** FINAL values of the running block the output schema refused (the first few). */
let rejectedFinals: RejectedFinal[] = [];
/** How a FINAL check's request starts (the prelude writes `kind` first). */
const CHECK_FINAL_HEAD = '{"kind":"check_final",';

function send(event: WorkerEvent) {
  writeFully(encodeFrame(event));
}

function writeFully(bytes: Buffer) {
  let offset = 0;
  while (offset < bytes.length) {
    try {
      offset += fs.writeSync(TO_HOST_FD, bytes, offset, bytes.length - offset);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
      Atomics.wait(sleepCell, 0, 0, 0.1);
    }
  }
}

/** Reads whatever is available; false when nothing was (the descriptor is non-blocking). */
function readAvailable(): boolean {
  try {
    const count = fs.readSync(FROM_HOST_FD, readBuffer, 0, readBuffer.length, null);
    if (count === 0) process.exit(0); // the host is gone
    // A copy: the decoder keeps the bytes of an incomplete frame, and the next read reuses readBuffer.
    decoder.push(Buffer.from(readBuffer.subarray(0, count)));
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EAGAIN') return false;
    throw error;
  }
}

type HostReplyCommand = Extract<WorkerCommand, { type: 'hostReply' }>;

/** Reads the channel until `wanted` accepts a reply; spins briefly, then sleeps on the doorbell. */
function waitForReply(wanted: (id: number) => boolean): HostReplyCommand {
  const started = performance.now();
  for (;;) {
    const reply = takeDecodedReply(wanted);
    if (reply) return reply;
    if (readAvailable()) continue;
    if (performance.now() - started < SPIN_MS) continue;
    // The host rings as soon as it has handed a reply to its socket; a large reply is then still
    // arriving, and the rest of it comes with no ring of its own.
    if (decoder.midFrame) {
      Atomics.wait(sleepCell, 0, 0, 0.1);
      continue;
    }
    // Blocks until the host rings. Rings for replies already read while spinning are consumed
    // here too: each costs one extra pass through this loop, never a missed reply.
    if (fs.readSync(DOORBELL_FD, doorbellBuffer, 0, doorbellBuffer.length, null) === 0) process.exit(0);
  }
}

/** A reply `wanted` accepts among what is already read, or (without blocking) can be read now. */
function pollReply(wanted: (id: number) => boolean): HostReplyCommand | undefined {
  for (;;) {
    const reply = takeDecodedReply(wanted);
    if (reply || !readAvailable()) return reply;
  }
}

function takeDecodedReply(wanted: (id: number) => boolean): HostReplyCommand | undefined {
  for (let message = decoder.next(); message; message = decoder.next()) {
    if (message.type !== 'hostReply') deferred.push(message);
    else if (wanted(message.id)) return message;
    else if (asyncCalls.has(message.id)) earlyReplies.set(message.id, message.payload);
    // Anything else answers a call of a block that has ended: dropped.
  }
  return undefined;
}

// Called synchronously from model code. It must never throw into the isolate: a host Error would
// carry host stack frames and paths. Every failure becomes a JSON error reply instead.
function hostCall(request: string): string {
  if (request.length > maxHostCallChars) return errorReply('RangeError', tooLargeMessage(request));
  if (request.startsWith(CHECK_FINAL_HEAD)) return checkFinal(request);
  return outsideIsolate(() => {
    try {
      const id = nextHostCallId++;
      send({ type: 'hostCall', id, payload: request });
      return waitForReply((replyId) => replyId === id).payload;
    } catch (error) {
      return errorReply('HostError', `the host call failed: ${describeError(error).message}`);
    }
  });
}

// Called synchronously from model code for a call it will await: sends the request and returns
// the call's id at once (or a JSON error reply). awaitAsyncCalls delivers the reply later.
function hostCallAsync(request: string): number | string {
  if (request.length > maxHostCallChars) return errorReply('RangeError', tooLargeMessage(request));
  return outsideIsolate(() => {
    try {
      const id = nextHostCallId++;
      send({ type: 'hostCallAsync', id, payload: request });
      asyncCalls.add(id);
      return id;
    } catch (error) {
      return errorReply('HostError', `the host call failed: ${describeError(error).message}`);
    }
  });
}

/**
 * A FINAL value checked against the output schema, here rather than in the host: model code can
 * loop FINAL of a huge value, and the check (zod lists every problem before it returns) must cost
 * the block's time, never the host's event loop. It runs inside the block's time (not
 * outsideIsolate), and once that is used up, FINAL is refused unchecked.
 */
function checkFinal(request: string): string {
  if (!outputCheck) return JSON.stringify({ ok: true, value: null } satisfies HostReply);
  if (runningBudget && runningBudget.leftMs() <= 0) {
    return errorReply('TimeoutError', 'FINAL: the block used up its time limit, so the answer was not checked. Call FINAL in a new block.');
  }
  try {
    const { answer } = JSON.parse(request) as { answer: string };
    const checked = outputCheck.validator.safeParse(JSON.parse(answer));
    if (checked.success) return JSON.stringify({ ok: true, value: null } satisfies HostReply);
    const problems = problemsOf(checked.error.issues);
    if (rejectedFinals.length < MAX_REJECTED_FINALS) rejectedFinals.push({ answer: clip(answer, REJECTED_ANSWER_CHARS), problems });
    return errorReply('TypeError', outputCheck.refusal.replace('{{problems}}', () => problemsText(problems)));
  } catch (error) {
    return errorReply('HostError', `FINAL: the answer could not be checked: ${describeError(error).message}`);
  }
}

/** Loads zod only when a schema arrives: workers of runs without one start as before. */
async function setOutputSchema(command: Extract<WorkerCommand, { type: 'setOutputSchema' }>): Promise<void> {
  if (command.schema === null) {
    outputCheck = undefined;
    return;
  }
  const { z } = await import('zod');
  const validator = z.fromJSONSchema(JSON.parse(command.schema) as Parameters<typeof z.fromJSONSchema>[0]);
  outputCheck = { validator, refusal: command.refusal };
}

function outsideIsolate<T>(call: () => T): T {
  const started = performance.now();
  try {
    return call();
  } finally {
    timeOutsideIsolateMs += performance.now() - started;
  }
}

function errorReply(name: string, message: string): string {
  return JSON.stringify({ ok: false, error: { name, message } } satisfies HostReply);
}

// The prelude writes the kind first; reading only the head keeps a huge request unparsed.
function tooLargeMessage(request: string): string {
  const kind = /^\{"kind":"(\w+)"/.exec(request.slice(0, 64))?.[1] ?? 'host call';
  const count = (chars: number) => chars.toLocaleString('en-US');
  return (
    `${kind}: the call is ${count(request.length)} characters, over the limit of ${count(maxHostCallChars)} per host call. ` +
    'Split the data across several calls, or send less (a slice, a summary).'
  );
}

function init(command: Extract<WorkerCommand, { type: 'init' }>) {
  maxHostCallChars = command.hostCallLimits.maxChars;
  isolate = new ivm.Isolate({ memoryLimit: command.memoryLimitMb });
  context = isolate.createContextSync();
  const script = isolate.compileScriptSync(
    `(function () { "use strict"; ${__RLM_PRELUDE_SOURCE__}; return rlmPrelude.install; })()`,
    { filename: PRELUDE_FILENAME },
  );
  const install = script.runSync(context, { reference: true }) as ivm.Reference<Function>;
  const hosts = [new ivm.Reference(hostCall), new ivm.Reference(hostCallAsync)];
  const controllerRef = install.applySync(undefined, [...hosts, JSON.stringify(command.hostCallLimits)], {
    result: { reference: true },
  }) as unknown as ivm.Reference<PreludeController>;
  const method = <Method extends keyof PreludeController>(name: Method) =>
    controllerRef.getSync(name, { reference: true }) as ivm.Reference<PreludeController[Method]>;
  controller = {
    setGlobal: method('setGlobal'),
    setTools: method('setTools'),
    beginBlock: method('beginBlock'),
    blockPending: method('blockPending'),
    settleAsync: method('settleAsync'),
    collect: method('collect'),
    outputReport: method('outputReport'),
    collectGarbage: method('collectGarbage'),
  };
}

function setGlobal(command: Extract<WorkerCommand, { type: 'setGlobal' }>) {
  const text = fs.readFileSync(command.path, command.encoding);
  // An ExternalCopy of a string becomes an external string inside the isolate: no second copy.
  const copy = new ivm.ExternalCopy(text).copyInto({ release: true });
  controller!.setGlobal.applySync(undefined, [command.name, copy, command.format], { timeout: command.timeoutMs });
}

type Outcome = 'completed' | 'timeout' | 'memory' | 'compile-error' | 'unhandled-rejection';
type StepResult = { outcome: Outcome; failure?: string };

function runBlock(command: Extract<WorkerCommand, { type: 'execute' }>): Extract<WorkerEvent, { type: 'executed' }> {
  const { code, timeoutMs, outputLimit, hasResult, wrapperLine, columnShifts, checkFinal } = command;
  rejectedFinals = [];
  controller!.beginBlock.applySync(undefined, [outputLimit, wrapperLine, JSON.stringify(columnShifts), checkFinal], { timeout: timeoutMs });
  try {
    const budget = new ExecutionBudget(timeoutMs);
    runningBudget = budget;
    let step = runScript(code, budget);
    if (step.outcome === 'completed') step = awaitAsyncCalls(budget);
    const { outcome, failure } = step;
    if (outcome === 'memory') return { type: 'executed', outcome, failure };
    const report = collectReport(hasResult && outcome === 'completed', budget);
    if (report.outcome !== 'completed') return { type: 'executed', ...report };
    const result = report.result!;
    const full = heapLeftFull(timeoutMs);
    if (full) return { type: 'executed', outcome: 'memory-full', failure: full, result };
    return { type: 'executed', outcome, failure, result };
  } finally {
    runningBudget = undefined;
    // Calls the block left unanswered: their replies, if any come, are dropped.
    asyncCalls.clear();
    earlyReplies.clear();
  }
}

/**
 * The block report. Making it can run model code the block left behind (a global getter, a Proxy
 * trap reached while listing variables or describing an error), so it runs in what is left of the
 * block's time, or in the report allowance when the block used it all. When it fails, the report
 * holds only the output and final answer, and the outcome says why: the host resets a sandbox
 * whose state would make every later report fail too.
 */
function collectReport(
  showResult: boolean,
  budget: ExecutionBudget,
): { outcome: 'completed' | 'memory' | 'memory-full' | 'report-timeout' | 'report-failed'; failure?: string; result?: string } {
  let result: string | undefined;
  const step = budget.runAtLeast(DEFAULTS.sandbox.reportAllowanceMs, (timeout) => {
    result = controller!.collect.applySync(undefined, [showResult], { timeout }) as string;
  });
  if (step.outcome === 'completed') return { outcome: 'completed', result: result! };
  if (step.outcome === 'memory') return { outcome: 'memory', ...(step.failure !== undefined && { failure: step.failure }) };
  const output = controller!.outputReport.applySync(undefined, [], { timeout: DEFAULTS.sandbox.reportAllowanceMs }) as string;
  // A heap left at its limit makes the report crawl from one collection to the next: that is the
  // block's memory, not code it left behind.
  const full = heapNearlyFull();
  if (full) return { outcome: 'memory-full', failure: full, result: output };
  if (step.outcome === 'timeout') return { outcome: 'report-timeout', result: output };
  return { outcome: 'report-failed', failure: step.failure ?? 'unknown error', result: output };
}

function runScript(code: string, budget: ExecutionBudget): StepResult {
  let script: ivm.Script;
  try {
    script = isolate!.compileScriptSync(code, { filename: BLOCK_FILENAME });
  } catch (error) {
    return { outcome: 'compile-error', failure: isolateErrorText(error) };
  }
  return budget.run((timeout) => script.runSync(context!, { timeout }));
}

/**
 * Once the block has run until it awaits: while it is still pending with asynchronous calls out,
 * gives it their replies one at a time. Each is followed by the isolate's microtasks, so the
 * block goes on until it awaits again (or ends).
 */
function awaitAsyncCalls(budget: ExecutionBudget): StepResult {
  while (asyncCalls.size > 0 && controller!.blockPending.applySync(undefined, []) === true) {
    const reply = nextAsyncReply();
    asyncCalls.delete(reply.id);
    const step = budget.run((timeout) => controller!.settleAsync.applySync(undefined, [reply.id, reply.payload], { timeout }));
    if (step.outcome !== 'completed') return step;
  }
  return { outcome: 'completed' };
}

/**
 * The next reply to an outstanding asynchronous call. When none has arrived, the host is told the
 * block can do nothing until one does: a host answering calls in batches knows when to answer.
 */
function nextAsyncReply(): { id: number; payload: string } {
  for (const [id, payload] of earlyReplies) {
    earlyReplies.delete(id);
    return { id, payload };
  }
  const isAsyncCall = (id: number) => asyncCalls.has(id);
  const ready = pollReply(isAsyncCall);
  if (ready) return ready;
  send({ type: 'waiting', calls: [...asyncCalls] });
  return waitForReply(isAsyncCall);
}

/**
 * The execution time a block has left. Each step (the first run, each resumption after a reply)
 * gets what is left as its timeout; time spent outside the isolate, waiting for the host, is not
 * used up, just as the isolate's own timeout pauses then.
 */
class ExecutionBudget {
  private usedMs = 0;
  /** The running step: when it started, with the time spent outside the isolate until then. */
  private step: { started: number; outsideBefore: number } | undefined;

  constructor(private readonly limitMs: number) {}

  /** Time the block has left now, the running step's use so far included. */
  leftMs(): number {
    const step = this.step;
    const stepUsedMs = step ? performance.now() - step.started - (timeOutsideIsolateMs - step.outsideBefore) : 0;
    return this.limitMs - this.usedMs - stepUsedMs;
  }

  run(step: (timeoutMs: number) => void): StepResult {
    return this.runAtLeast(0, step);
  }

  /** Like `run`, but with at least `minimumMs` even when the block has used up its time. */
  runAtLeast(minimumMs: number, step: (timeoutMs: number) => void): StepResult {
    const leftMs = Math.max(this.limitMs - this.usedMs, minimumMs);
    if (leftMs <= 0) return { outcome: 'timeout' };
    const started = performance.now();
    const outsideBefore = timeOutsideIsolateMs;
    this.step = { started, outsideBefore };
    try {
      step(Math.ceil(leftMs));
      return { outcome: 'completed' };
    } catch (error) {
      return failedStep(error);
    } finally {
      this.step = undefined;
      this.usedMs += performance.now() - started - (timeOutsideIsolateMs - outsideBefore);
    }
  }
}

// The block's own errors settle its promise; what escapes a step is a timeout, the memory limit,
// or a promise rejected elsewhere that nothing handled.
function failedStep(error: unknown): StepResult {
  const failure = isolateErrorText(error);
  if (isolate!.isDisposed) return { outcome: 'memory', failure };
  if (isTimeoutText(failure)) return { outcome: 'timeout', failure };
  return { outcome: 'unhandled-rejection', failure };
}

/**
 * A block that leaves the heap nearly full (its data, or an allocation cut short by the timeout)
 * makes the next block fail, however innocent. Checked after every block: over the threshold, the
 * garbage is collected and the heap measured again; still over, the block is reported as the one
 * that filled the sandbox. Returns "N of M MB" then, else undefined.
 */
function heapLeftFull(timeoutMs: number): string | undefined {
  if (!heapNearlyFull()) return undefined;
  controller!.collectGarbage.applySync(undefined, [], { timeout: Math.max(timeoutMs, 1_000) });
  return heapNearlyFull();
}

/** "N of M MB" when the heap is over HEAP_FULL_SHARE of its limit, else undefined. */
function heapNearlyFull(): string | undefined {
  const { used_heap_size: used, heap_size_limit: limit } = isolate!.getHeapStatisticsSync();
  return used > HEAP_FULL_SHARE * limit ? `${Math.round(used / 2 ** 20)} of ${Math.round(limit / 2 ** 20)} MB` : undefined;
}

function handle(command: WorkerCommand) {
  try {
    switch (command.type) {
      case 'init':
        init(command);
        send({ type: 'done', id: command.id });
        break;
      case 'setGlobal':
        setGlobal(command);
        send({ type: 'done', id: command.id });
        break;
      case 'setTools':
        controller!.setTools.applySync(undefined, [command.specs, JSON.stringify(command.asyncTools)], { timeout: command.timeoutMs });
        send({ type: 'done', id: command.id });
        break;
      case 'setOutputSchema':
        // Answered once zod has loaded; the host sends nothing else until then.
        setOutputSchema(command).then(
          () => send({ type: 'done', id: command.id }),
          (error: unknown) => send({ type: 'failed', id: command.id, message: describeError(error).message, disposed: false }),
        );
        break;
      case 'execute':
        send({ ...runBlock(command), ...(rejectedFinals.length > 0 && { rejectedFinals }), id: command.id });
        break;
      case 'hostReply':
        break; // a reply that arrived after its block ended
    }
  } catch (error) {
    const disposed = isolate?.isDisposed ?? false;
    send({ type: 'failed', id: command.id, message: describeError(error).message, disposed });
  }
}

function drain() {
  for (let message = deferred.shift() ?? decoder.next(); message; message = deferred.shift() ?? decoder.next()) handle(message);
}

// Wrapping the descriptor in a socket makes it non-blocking (so the reply wait can poll it) and lets
// the event loop wake this process when a command arrives while it is idle.
const input = new net.Socket({ fd: FROM_HOST_FD, readable: true, writable: false });
input.on('data', (chunk: Buffer) => {
  decoder.push(chunk);
  drain();
});
input.on('end', () => process.exit(0));
input.on('error', () => process.exit(0));
startOrphanWatchdog();
send({ type: 'ready' });
