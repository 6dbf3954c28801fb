// Calls from model code to the host, through the two references the worker hands to install: one
// that waits for the reply, one that returns a promise settled when the reply comes. The references
// stay in this closure; model code only ever gets the functions built on them.
import type { HostCallLimits } from '../src/sandbox/shared.js';
import type { AsyncCall, BlockState } from './block-state.js';
import { errorMessage } from './error-text.js';
import { readOwnString } from './inspect.js';
import { toJsonText } from './json.js';
import {
  ErrorCtor,
  FunctionPrototypeHasInstance,
  JSONParse,
  JSONStringify,
  ObjectDefineProperty,
  ObjectHasOwn,
  PromiseCtor,
  PromisePrototypeThen,
  RangeErrorCtor,
  TypeErrorCtor,
  dataDescriptor,
  isError,
  newRecord,
  readOwn,
} from './primordials.js';

/**
 * The isolated-vm Reference to the worker's host-call function, as seen inside the isolate. The
 * block runs on a thread of its own; the call sleeps there until the worker has the reply.
 */
export interface HostReference {
  applySyncPromise(receiver: undefined, args: [string]): string;
}

/** The worker's function that sends a call without waiting: the call's id, or a JSON error reply. */
export interface AsyncHostReference {
  applySync(receiver: undefined, args: [string]): number | string;
}

interface HostCallsOptions {
  host: HostReference;
  hostAsync: AsyncHostReference;
  limits: HostCallLimits;
  currentBlock: () => BlockState;
}

/** An asynchronous call: `label` as in HostCalls.call, `present` turns the reply's value into what the promise resolves to. */
interface AsyncCallRequest {
  kind: string;
  payload: Record<string, unknown>;
  label: string;
  present: (value: unknown) => unknown;
}

export interface HostCalls {
  /** Waits for the reply. `label` names the call in errors the way model code wrote it (tool_handler, tools.NAME). */
  call(kind: string, payload: Record<string, unknown>, label?: string): unknown;
  /**
   * Sends a call without waiting for it and returns a promise of its value, so a block can have
   * several calls in flight at once. The worker delivers the reply (settle) once the block awaits.
   */
  callAsync(request: AsyncCallRequest): Promise<unknown>;
  /** Settles the running block's call `id` with its reply; replies to calls of other blocks are dropped. */
  settle(id: number, replyJson: string): void;
}

const REMOVABLE = { writable: true, enumerable: false, configurable: true } as const;

export function createHostCalls({ host, hostAsync, limits, currentBlock }: HostCallsOptions): HostCalls {
  function requestText(kind: string, payload: Record<string, unknown>, label: string): string {
    payload.kind = kind;
    try {
      return toJsonText(payload, limits);
    } catch (error) {
      const reason = isError(error) ? errorMessage(error) : 'the value cannot be read';
      if (FunctionPrototypeHasInstance(RangeErrorCtor, error)) {
        throw new RangeErrorCtor(`${label}: ${reason}. Split the data across several calls, or send less (a slice, a summary).`);
      }
      throw new TypeErrorCtor(`${label}: the arguments cannot be sent to the host (${reason}). Pass plain strings, numbers, arrays and objects.`);
    }
  }

  // The promise comes from the captured Promise constructor: nothing model code changed on
  // Promise takes part in settling it.
  function callAsync({ kind, payload, label, present }: AsyncCallRequest): Promise<unknown> {
    const call = newRecord<unknown>() as unknown as AsyncCall;
    const promise = new PromiseCtor<unknown>((resolve, reject) => {
      call.resolve = resolve;
      call.reject = reject;
    });
    call.present = present;
    call.shownAs = label === 'tool_handler' ? `tool_handler(${JSONStringify(payload.name)})` : label;
    markHandled(promise);
    let ticket: number | string;
    try {
      ticket = hostAsync.applySync(undefined, [requestText(kind, payload, label)]);
    } catch (error) {
      call.reject(error);
      return promise;
    }
    if (typeof ticket === 'number') currentBlock().asyncCalls[ticket] = call;
    else settleCall(call, ticket);
    return promise;
  }

  return {
    call: (kind, payload, label = kind) => replyValue(host.applySyncPromise(undefined, [requestText(kind, payload, label)])),
    callAsync,
    settle(id, replyJson) {
      const calls = currentBlock().asyncCalls;
      const call = calls[id];
      if (call === undefined) return;
      delete calls[id];
      settleCall(call, replyJson);
    },
  };
}

/** The value a host reply carries; a failed call throws an Error with the host's name and message. */
function replyValue(replyJson: string): unknown {
  const reply = JSONParse(replyJson) as object;
  if (readOwn(reply, 'ok') === true) return readOwn(reply, 'value');
  const failure = readOwn(reply, 'error') as object;
  const error = new ErrorCtor(readOwnString(failure, 'message') ?? 'the host call failed');
  ObjectDefineProperty(error, 'name', dataDescriptor(readOwnString(failure, 'name') ?? 'Error', REMOVABLE));
  throw error;
}

// Replies come in whatever order the host answers, so a call's failure may arrive while the block
// still awaits an earlier call (`const a = tools.x(); const b = tools.y(); await a; await b`).
// It must wait for the block's own await of it, not end the block as an unhandled rejection. An
// own undefined `constructor` keeps `then` from taking a species constructor from anything model
// code can reach, for exactly the moment it looks.
function markHandled(promise: Promise<unknown>) {
  ObjectDefineProperty(promise, 'constructor', dataDescriptor(undefined, REMOVABLE));
  PromisePrototypeThen(promise, ignore, ignore);
  delete (promise as { constructor?: unknown }).constructor;
}

function settleCall(call: AsyncCall, replyJson: string) {
  let value: unknown;
  try {
    value = call.present(replyValue(replyJson));
  } catch (error) {
    call.reject(error);
    return;
  }
  fulfill(call.resolve, value);
}

// Resolving a promise with an object reads the object's `then`, and a JSON value inherits whatever
// model code put on Object.prototype or Array.prototype: a `then` there would take the value over.
// An own undefined `then` hides it for exactly the moment `resolve` reads it. (An own `then` from
// the JSON itself is data, never a function.)
function fulfill(resolve: (value: unknown) => void, value: unknown) {
  if (value === null || typeof value !== 'object' || ObjectHasOwn(value, 'then')) {
    resolve(value);
    return;
  }
  ObjectDefineProperty(value, 'then', dataDescriptor(undefined, REMOVABLE));
  resolve(value);
  delete (value as { then?: unknown }).then;
}

function ignore(): void {}
