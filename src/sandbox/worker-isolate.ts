// One run's isolate inside a worker process. A worker hosts many of them; nothing of one is
// reachable from another: each has its own V8 isolate (own heap, own heap limit, own built-ins), its
// own host references, its own calls and replies, and the host addresses it by its sandbox id.
//
// Blocks run asynchronously on isolated-vm's threads, never on the worker's main thread, so a
// block that computes or waits does not hold up the other runs of the process. A host call from
// model code (`llm_query`) is `applySyncPromise` on `hostCall` below: the block's thread sleeps
// (its timeout paused) while this process's main thread sends the call to the host and waits for
// the reply among the others' traffic.
//
// Calls to asynchronous tools do not wait: the request goes out and model code gets a promise.
// When the block has run until it awaits and such calls are outstanding, the worker tells the host
// it is waiting, waits for the next reply, and hands it to the prelude, which lets the block go on
// (awaitAsyncCalls). The block's time limit counts only the time spent running it.
import { formatCount } from '../format.js';
import fs from 'node:fs';
import ivm from 'isolated-vm';
import type { z } from 'zod';
import { DEFAULTS } from '../defaults.js';
import { describeError } from '../errors.js';
import { ExecutionBudget, type StepResult } from './execution-budget.js';
import { isolateErrorText } from './isolate-errors.js';
import type { HostReply, WorkerCommand, WorkerEvent } from './protocol.js';
import { MAX_REJECTED_FINALS, problemsOf, problemsText, REJECTED_ANSWER_CHARS, type RejectedFinal } from './schema-problems.js';
import { BLOCK_FILENAME, clip, type HostCallLimits, type PreludeController } from './shared.js';

/** Share of the heap limit still in use after a block and a full collection that counts as full. */
const HEAP_FULL_SHARE = 0.9;
/** How a FINAL check's request starts (the prelude writes `kind` first). */
const CHECK_FINAL_HEAD = '{"kind":"check_final",';

/**
 * A fresh isolate with the prelude installed and its report code run once (so a run's first block
 * does not pay for compiling it), waiting for the run that takes it: until then its host
 * references answer every call with an error. No model code has run in it.
 */
export interface PreparedIsolate {
  isolate: ivm.Isolate;
  context: ivm.Context;
  controller: PreludeReferences;
  /** The run the host references serve, once one takes the isolate. */
  owner: { run: RunIsolate | undefined };
}

/** An event for the host, without the sandbox id the worker adds. */
export type RunEvent = WorkerEvent extends infer E ? (E extends { sandbox: number } ? Omit<E, 'sandbox'> : never) : never;
type Command<Type extends WorkerCommand['type']> = Extract<WorkerCommand, { type: Type }>;
/** A reference to each method of the prelude's controller, typed by the prelude's own signature. */
type PreludeReferences = { [Method in keyof PreludeController]: ivm.Reference<PreludeController[Method]> };
type ExecutedEvent = Extract<RunEvent, { type: 'executed' }>;

export class RunIsolate {
  readonly #isolate: ivm.Isolate;
  readonly #context: ivm.Context;
  readonly #controller: PreludeReferences;
  readonly #send: (event: RunEvent) => void;
  readonly #maxHostCallChars: number;
  #nextHostCallId = 1;
  /** Synchronous calls waiting for their reply (one at most: the block's thread sleeps meanwhile). */
  readonly #waitingCalls = new Map<number, (payload: string) => void>();
  /** Asynchronous calls of the running block whose replies the prelude has not been given yet. */
  readonly #asyncCalls = new Set<number>();
  /** Replies to asynchronous calls not yet handed to the prelude. */
  readonly #asyncReplies = new Map<number, string>();
  #wakeForAsyncReply: (() => void) | undefined;
  /** Time model code spent in calls to this process (the isolate's timeout is paused meanwhile). */
  #timeOutsideIsolateMs = 0;
  /** The output schema's validator and what a refused FINAL throws (see setOutputSchema). */
  #outputCheck: { validator: z.ZodType; refusal: string } | undefined;
  /** The running block's time: checks of its FINAL values spend it. */
  #runningBudget: ExecutionBudget | undefined;
  /** FINAL values of the running block the output schema refused (the first few). */
  #rejectedFinals: RejectedFinal[] = [];

  private constructor(prepared: PreparedIsolate, options: { send: (event: RunEvent) => void; maxHostCallChars: number }) {
    this.#isolate = prepared.isolate;
    this.#context = prepared.context;
    this.#controller = prepared.controller;
    this.#send = options.send;
    this.#maxHostCallChars = options.maxHostCallChars;
  }

  /** A fresh isolate, prepared ahead of the run that will take it (see PreparedIsolate). */
  static async prepare(options: { memoryLimitMb: number; hostCallLimits: HostCallLimits; preludeSource: string; preludeFilename: string }): Promise<PreparedIsolate> {
    const isolate = new ivm.Isolate({ memoryLimit: options.memoryLimitMb });
    try {
      const context = await isolate.createContext();
      const source = `(function () { "use strict"; ${options.preludeSource}; return rlmPrelude.install; })()`;
      const script = await isolate.compileScript(source, { filename: options.preludeFilename });
      const install = (await script.run(context, { reference: true })) as ivm.Reference<Function>;
      const owner: PreparedIsolate['owner'] = { run: undefined };
      const unowned = () => errorReply('HostError', 'the sandbox is not started');
      const hosts = [
        new ivm.Reference((request: string) => (owner.run ? owner.run.#hostCall(request) : unowned())),
        new ivm.Reference((request: string) => (owner.run ? owner.run.#hostCallAsync(request) : unowned())),
      ];
      const controllerRef = (await install.apply(undefined, [...hosts, JSON.stringify(options.hostCallLimits)], { result: { reference: true } })) as unknown as ivm.Reference<PreludeController>;
      const method = <Method extends keyof PreludeController>(name: Method) => controllerRef.getSync(name, { reference: true }) as ivm.Reference<PreludeController[Method]>;
      const controller: PreludeReferences = {
        setGlobal: method('setGlobal'),
        setTools: method('setTools'),
        beginBlock: method('beginBlock'),
        blockPending: method('blockPending'),
        settleAsync: method('settleAsync'),
        collect: method('collect'),
        outputReport: method('outputReport'),
        collectGarbage: method('collectGarbage'),
      };
      // The report of the idle state: compiles the report code now, changes nothing a block sees.
      await controller.collect.apply(undefined, [false], { timeout: DEFAULTS.sandbox.reportAllowanceMs });
      return { isolate, context, controller, owner };
    } catch (error) {
      if (!isolate.isDisposed) isolate.dispose();
      throw error;
    }
  }

  /** Hands a prepared isolate to a run: from now on its host references serve this run. */
  static take(prepared: PreparedIsolate, options: { send: (event: RunEvent) => void; maxHostCallChars: number }): RunIsolate {
    const run = new RunIsolate(prepared, options);
    prepared.owner.run = run;
    return run;
  }

  get disposed(): boolean {
    return this.#isolate.isDisposed;
  }

  /** Ends the isolate, also while a block runs in it: the block stops where it is. */
  dispose(): void {
    if (!this.#isolate.isDisposed) this.#isolate.dispose();
    for (const resolve of this.#waitingCalls.values()) resolve(errorReply('HostError', 'the sandbox was disposed'));
    this.#waitingCalls.clear();
    this.#wakeForAsyncReply?.();
  }

  async setGlobal(command: Command<'setGlobal'>): Promise<void> {
    const text = await fs.promises.readFile(command.path, command.encoding);
    // An ExternalCopy of a string becomes an external string inside the isolate: no second copy.
    const copy = new ivm.ExternalCopy(text).copyInto({ release: true });
    await this.#controller.setGlobal.apply(undefined, [command.name, copy, command.format], { timeout: command.timeoutMs });
  }

  async setTools(command: Command<'setTools'>): Promise<void> {
    await this.#controller.setTools.apply(undefined, [command.specs, JSON.stringify(command.asyncTools)], { timeout: command.timeoutMs });
  }

  /** Loads zod only when a schema arrives: runs without one never pay for it. */
  async setOutputSchema(command: Command<'setOutputSchema'>): Promise<void> {
    if (command.schema === null) {
      this.#outputCheck = undefined;
      return;
    }
    const { z } = await import('zod');
    const validator = z.fromJSONSchema(JSON.parse(command.schema) as Parameters<typeof z.fromJSONSchema>[0]);
    this.#outputCheck = { validator, refusal: command.refusal };
  }

  /** A reply from the host to one of this run's calls; one to a call of an ended block is dropped. */
  receiveReply(id: number, payload: string): void {
    const waiting = this.#waitingCalls.get(id);
    if (waiting) {
      this.#waitingCalls.delete(id);
      waiting(payload);
    } else if (this.#asyncCalls.has(id)) {
      this.#asyncReplies.set(id, payload);
      this.#wakeForAsyncReply?.();
    }
  }

  async execute(command: Command<'execute'>): Promise<ExecutedEvent & { rejectedFinals?: RejectedFinal[] }> {
    this.#rejectedFinals = [];
    try {
      const executed = await this.#runBlock(command);
      return this.#rejectedFinals.length > 0 ? { ...executed, rejectedFinals: this.#rejectedFinals } : executed;
    } finally {
      this.#runningBudget = undefined;
      // Calls the block left unanswered: their replies, if any come, are dropped.
      this.#asyncCalls.clear();
      this.#asyncReplies.clear();
    }
  }

  async #runBlock(command: Command<'execute'>): Promise<ExecutedEvent> {
    const { code, timeoutMs, outputLimit, hasResult, wrapperLine, columnShifts, checkFinal } = command;
    // Steps that run no model code (starting the block's state, compiling it, asking whether it is
    // pending, reading the heap's size) run on this thread: each trip to an isolate thread and
    // back costs more than the step. Model code itself always runs on the isolate's thread.
    this.#controller.beginBlock.applySync(undefined, [outputLimit, wrapperLine, JSON.stringify(columnShifts), checkFinal], { timeout: timeoutMs });
    const budget = new ExecutionBudget(timeoutMs, () => this.#timeOutsideIsolateMs, () => this.#isolate.isDisposed);
    this.#runningBudget = budget;
    let step = await this.#runScript(code, budget);
    if (step.outcome === 'completed') step = await this.#awaitAsyncCalls(budget);
    const { outcome, failure } = step;
    if (outcome === 'memory') return { type: 'executed', id: command.id, outcome, failure };
    const report = await this.#collectReport(hasResult && outcome === 'completed', budget);
    if (report.outcome !== 'completed') return { type: 'executed', id: command.id, ...report };
    const full = await this.#heapLeftFull(timeoutMs);
    if (full) return { type: 'executed', id: command.id, outcome: 'memory-full', failure: full, result: report.result };
    return { type: 'executed', id: command.id, outcome, failure, result: report.result };
  }

  async #runScript(code: string, budget: ExecutionBudget): Promise<StepResult> {
    let script: ivm.Script;
    try {
      script = this.#isolate.compileScriptSync(code, { filename: BLOCK_FILENAME });
    } catch (error) {
      if (this.#isolate.isDisposed) return { outcome: 'memory', failure: isolateErrorText(error) };
      return { outcome: 'compile-error', failure: isolateErrorText(error) };
    }
    return budget.run((timeout) => script.run(this.#context, { timeout }));
  }

  /**
   * Once the block has run until it awaits: while it is still pending with asynchronous calls out,
   * gives it their replies one at a time. Each is followed by the isolate's microtasks, so the
   * block goes on until it awaits again (or ends).
   */
  async #awaitAsyncCalls(budget: ExecutionBudget): Promise<StepResult> {
    while (this.#asyncCalls.size > 0 && this.#controller.blockPending.applySync(undefined, []) === true) {
      const reply = await this.#nextAsyncReply();
      this.#asyncCalls.delete(reply.id);
      const step = await budget.run((timeout) => this.#controller.settleAsync.apply(undefined, [reply.id, reply.payload], { timeout }));
      if (step.outcome !== 'completed') return step;
    }
    return { outcome: 'completed' };
  }

  /**
   * The next reply to an outstanding asynchronous call. When none has arrived, the host is told the
   * block can do nothing until one does: a host answering calls in batches knows when to answer.
   */
  async #nextAsyncReply(): Promise<{ id: number; payload: string }> {
    if (this.#asyncReplies.size === 0) {
      this.#send({ type: 'waiting', calls: [...this.#asyncCalls] });
      await new Promise<void>((resolve) => (this.#wakeForAsyncReply = resolve));
      this.#wakeForAsyncReply = undefined;
      if (this.#isolate.isDisposed) throw new Error('Isolate is disposed');
    }
    const [id, payload] = this.#asyncReplies.entries().next().value!;
    this.#asyncReplies.delete(id);
    return { id, payload };
  }

  /**
   * The block report. Making it can run model code the block left behind (a global getter, a Proxy
   * trap reached while listing variables or describing an error), so it runs in what is left of the
   * block's time, or in the report allowance when the block used it all. When it fails, the report
   * holds only the output and final answer, and the outcome says why: the host resets a sandbox
   * whose state would make every later report fail too.
   */
  async #collectReport(
    showResult: boolean,
    budget: ExecutionBudget,
  ): Promise<{ outcome: 'completed' | 'memory' | 'memory-full' | 'report-timeout' | 'report-failed'; failure?: string; result?: string }> {
    let result: string | undefined;
    const step = await budget.runAtLeast(DEFAULTS.sandbox.reportAllowanceMs, async (timeout) => {
      result = (await this.#controller.collect.apply(undefined, [showResult], { timeout })) as string;
    });
    if (step.outcome === 'completed') return { outcome: 'completed', result: result! };
    if (step.outcome === 'memory') return { outcome: 'memory', ...(step.failure !== undefined && { failure: step.failure }) };
    const output = (await this.#controller.outputReport.apply(undefined, [], { timeout: DEFAULTS.sandbox.reportAllowanceMs })) as string;
    // A heap left at its limit makes the report crawl from one collection to the next: that is the
    // block's memory, not code it left behind.
    const full = this.#heapNearlyFull();
    if (full) return { outcome: 'memory-full', failure: full, result: output };
    if (step.outcome === 'timeout') return { outcome: 'report-timeout', result: output };
    return { outcome: 'report-failed', failure: step.failure ?? 'unknown error', result: output };
  }

  /**
   * A block that leaves the heap nearly full (its data, or an allocation cut short by the timeout)
   * makes the next block fail, however innocent. Checked after every block: over the threshold, the
   * garbage is collected and the heap measured again; still over, the block is reported as the one
   * that filled the sandbox. Returns "N of M MB" then, else undefined.
   */
  async #heapLeftFull(timeoutMs: number): Promise<string | undefined> {
    if (!this.#heapNearlyFull()) return undefined;
    await this.#controller.collectGarbage.apply(undefined, [], { timeout: Math.max(timeoutMs, 1_000) });
    return this.#heapNearlyFull();
  }

  /** "N of M MB" when the heap is over HEAP_FULL_SHARE of its limit, else undefined. */
  #heapNearlyFull(): string | undefined {
    const { used_heap_size: used, heap_size_limit: limit } = this.#isolate.getHeapStatisticsSync();
    return used > HEAP_FULL_SHARE * limit ? `${Math.round(used / 2 ** 20)} of ${Math.round(limit / 2 ** 20)} MB` : undefined;
  }

  // Called from model code through applySyncPromise: the block's thread sleeps until the promise
  // settles. It must never reject into the isolate: a host Error would carry host stack frames and
  // paths. Every failure becomes a JSON error reply instead.
  #hostCall(request: string): string | Promise<string> {
    if (request.length > this.#maxHostCallChars) return errorReply('RangeError', tooLargeMessage(request, this.#maxHostCallChars));
    if (request.startsWith(CHECK_FINAL_HEAD)) return this.#checkFinal(request);
    const started = performance.now();
    try {
      const id = this.#nextHostCallId++;
      const reply = new Promise<string>((resolve) => this.#waitingCalls.set(id, resolve));
      this.#send({ type: 'hostCall', id, payload: request });
      return reply.finally(() => {
        this.#timeOutsideIsolateMs += performance.now() - started;
      });
    } catch (error) {
      return errorReply('HostError', `the host call failed: ${describeError(error).message}`);
    }
  }

  // Called synchronously from model code for a call it will await: sends the request and returns
  // the call's id at once (or a JSON error reply). awaitAsyncCalls delivers the reply later.
  #hostCallAsync(request: string): number | string {
    if (request.length > this.#maxHostCallChars) return errorReply('RangeError', tooLargeMessage(request, this.#maxHostCallChars));
    try {
      const id = this.#nextHostCallId++;
      this.#send({ type: 'hostCallAsync', id, payload: request });
      this.#asyncCalls.add(id);
      return id;
    } catch (error) {
      return errorReply('HostError', `the host call failed: ${describeError(error).message}`);
    }
  }

  /**
   * A FINAL value checked against the output schema, here rather than in the host: model code can
   * loop FINAL of a huge value, and the check (zod lists every problem before it returns) must cost
   * the block's time, never the host's event loop. Once that time is used up, FINAL is refused
   * unchecked.
   */
  #checkFinal(request: string): string {
    const check = this.#outputCheck;
    if (!check) return JSON.stringify({ ok: true, value: null } satisfies HostReply);
    if (this.#runningBudget && this.#runningBudget.leftMs() <= 0) {
      return errorReply('TimeoutError', 'FINAL: the block used up its time limit, so the answer was not checked. Call FINAL in a new block.');
    }
    try {
      const { answer } = JSON.parse(request) as { answer: string };
      const checked = check.validator.safeParse(JSON.parse(answer));
      if (checked.success) return JSON.stringify({ ok: true, value: null } satisfies HostReply);
      const problems = problemsOf(checked.error.issues);
      if (this.#rejectedFinals.length < MAX_REJECTED_FINALS) this.#rejectedFinals.push({ answer: clip(answer, REJECTED_ANSWER_CHARS), problems });
      return errorReply('TypeError', check.refusal.replace('{{problems}}', () => problemsText(problems)));
    } catch (error) {
      return errorReply('HostError', `FINAL: the answer could not be checked: ${describeError(error).message}`);
    }
  }
}

function errorReply(name: string, message: string): string {
  return JSON.stringify({ ok: false, error: { name, message } } satisfies HostReply);
}

// The prelude writes the kind first; reading only the head keeps a huge request unparsed.
function tooLargeMessage(request: string, maxHostCallChars: number): string {
  const kind = /^\{"kind":"(\w+)"/.exec(request.slice(0, 64))?.[1] ?? 'host call';
  return (
    `${kind}: the call is ${formatCount(request.length)} characters, over the limit of ${formatCount(maxHostCallChars)} per host call. ` +
    'Split the data across several calls, or send less (a slice, a summary).'
  );
}
