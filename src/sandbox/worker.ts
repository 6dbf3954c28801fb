// The sandbox worker: a child process that hosts the isolates of one or more runs (see
// worker-isolate.ts for one run's isolate). It is a separate process because some allocation bombs
// drive V8 into its fatal-error path, where the only way out is to kill the process: the host
// survives, fails the runs this process hosted with the cause, and starts a fresh process.
//
// The main thread only routes: commands from the host to the run they name, host calls and
// reports from the runs back to the host. Model code runs on isolated-vm's threads.
import net from 'node:net';
import { describeError } from '../errors.js';
import { encodeFrame, FrameDecoder } from './framing.js';
import { startOrphanWatchdog } from './orphan-watchdog.js';
import type { WorkerCommand, WorkerEvent } from './protocol.js';
import { ONE_RUN_FLAG, PRELUDE_FILENAME } from './shared.js';
import { RunIsolate, type PreparedIsolate, type RunEvent } from './worker-isolate.js';

/**
 * The in-isolate prelude: sandbox/prelude.ts (with sandbox/primordials.ts, inspect.ts, json.ts),
 * bundled by scripts/build.mjs into this string constant of dist/sandbox-worker.js.
 */
declare const __RLM_PRELUDE_SOURCE__: string;

const TO_HOST_FD = 3;
const FROM_HOST_FD = 4;
/** A process of one run's own (`isolation: 'process'`) makes no spare isolates: no other run comes. */
const HOSTS_ONE_RUN = process.argv.includes(ONE_RUN_FLAG);
/** Kinds of spare isolates kept (heap limit and host-call limits: the most recent ones asked for). */
const SPARE_KINDS = 4;

const decoder = new FrameDecoder<WorkerCommand>();
const runs = new Map<number, RunIsolate>();
/** Runs still being set up, and those of them the host ended meanwhile (their isolate must not stay). */
const starting = new Set<number>();
const endedWhileStarting = new Set<number>();
/** One isolate made ahead of need per kind: a run starts in the time of a round trip. */
const spares = new Map<string, Promise<PreparedIsolate>>();

type IsolateKind = Pick<Extract<WorkerCommand, { type: 'init' }>, 'memoryLimitMb' | 'hostCallLimits'>;

/**
 * The host is gone: end at once. Not process.exit: isolated-vm joins its threads on the way out,
 * and one running a block in an endless loop would never be joined.
 */
function hostGone(): never {
  process.kill(process.pid, 'SIGKILL');
  throw new Error('unreachable');
}

const output = new net.Socket({ fd: TO_HOST_FD, readable: false, writable: true });
output.on('error', hostGone);

function send(event: WorkerEvent) {
  output.write(encodeFrame(event));
}

function prepare(kind: IsolateKind): Promise<PreparedIsolate> {
  const prepared = RunIsolate.prepare({ ...kind, preludeSource: __RLM_PRELUDE_SOURCE__, preludeFilename: PRELUDE_FILENAME });
  prepared.catch(() => {}); // whoever takes it sees the failure
  return prepared;
}

/** A spare isolate of this kind (made now if none waits); another is made for the next run. */
function takeIsolate(kind: IsolateKind): Promise<PreparedIsolate> {
  const key = JSON.stringify([kind.memoryLimitMb, kind.hostCallLimits]);
  const taken = spares.get(key) ?? prepare(kind);
  spares.delete(key);
  // Made after this run's isolate, so it never delays it.
  if (!HOSTS_ONE_RUN) void taken.finally(() => setImmediate(() => refillSpare(key, kind)));
  return taken;
}

function refillSpare(key: string, kind: IsolateKind) {
  if (spares.has(key)) return;
  for (const [oldKey, spare] of spares) {
    if (spares.size < SPARE_KINDS) break;
    spares.delete(oldKey);
    void spare.then(({ isolate }) => isolate.dispose(), () => {});
  }
  spares.set(key, prepare(kind));
}

async function init(command: Extract<WorkerCommand, { type: 'init' }>): Promise<void> {
  const { sandbox } = command;
  if (runs.has(sandbox) || starting.has(sandbox)) throw new Error(`sandbox ${sandbox} exists already`);
  starting.add(sandbox);
  try {
    const prepared = await takeIsolate(command);
    const run = RunIsolate.take(prepared, { send: (event: RunEvent) => send({ ...event, sandbox } as WorkerEvent), maxHostCallChars: command.hostCallLimits.maxChars });
    if (endedWhileStarting.has(sandbox)) run.dispose();
    else runs.set(sandbox, run);
  } finally {
    starting.delete(sandbox);
    endedWhileStarting.delete(sandbox);
  }
}

function runOf(sandbox: number): RunIsolate {
  const run = runs.get(sandbox);
  if (!run) throw new Error(`no sandbox ${sandbox} in this worker`);
  return run;
}

async function handle(command: WorkerCommand): Promise<void> {
  const { sandbox, id } = command;
  switch (command.type) {
    case 'init':
      await init(command);
      break;
    case 'setGlobal':
      await runOf(sandbox).setGlobal(command);
      break;
    case 'setTools':
      await runOf(sandbox).setTools(command);
      break;
    case 'setOutputSchema':
      await runOf(sandbox).setOutputSchema(command);
      break;
    case 'execute':
      send({ ...(await runOf(sandbox).execute(command)), sandbox });
      return;
    case 'dispose':
      if (starting.has(sandbox)) endedWhileStarting.add(sandbox);
      runs.get(sandbox)?.dispose();
      runs.delete(sandbox);
      break;
    case 'hostReply':
      runs.get(sandbox)?.receiveReply(id, command.payload); // a reply to a disposed run is dropped
      return;
  }
  send({ type: 'done', id, sandbox });
}

function dispatch(command: WorkerCommand) {
  handle(command).catch((error: unknown) => {
    const disposed = runs.get(command.sandbox)?.disposed ?? false;
    send({ type: 'failed', id: command.id, sandbox: command.sandbox, message: describeError(error).message, disposed });
  });
}

const input = new net.Socket({ fd: FROM_HOST_FD, readable: true, writable: false });
input.on('data', (chunk: Buffer) => {
  decoder.push(chunk);
  for (let command = decoder.next(); command; command = decoder.next()) dispatch(command);
});
input.on('end', hostGone);
input.on('error', hostGone);
startOrphanWatchdog();
send({ type: 'ready' });
