// The prelude runs inside every sandbox isolate before any model code. It installs the scaffold
// globals (print, console, FINAL, FINAL_VAR, SHOW_VARS, llm_query, ...) and the controller the
// worker process uses to run blocks. The two host references it receives (calls that wait for
// their reply, calls that return a promise) stay in this closure: no global, property or stack
// frame reachable from model code ever holds them.
//
// Model code runs in the same realm and may pollute every built-in. The prelude therefore uses only
// the captured primordials and the helpers beside them (null-prototype lists, records and
// descriptors, own-property reads, a JSON writer that ignores toJSON), never iterates or uses
// `instanceof` on model-reachable objects, and bounds everything it reports.
import { toolErrorText, toolOutputText } from '../src/lm/tool-text.js';
import {
  BLOCK_FILENAME,
  BLOCK_HOOK,
  REPORT_LIMITS,
  RESERVED_SESSION_NAMES,
  SESSION_NAME_PREFIXES,
  type HostCallLimits,
  type ToolHandBackReply,
} from '../src/sandbox/shared.js';
import { describeType, inspect, isPromiseLike, readOwnString } from './inspect.js';
import { toJsonText } from './json.js';
import {
  ArrayIsArray,
  ArrayPrototypeJoin,
  ArrayPrototypePush,
  ArrayPrototypeSort,
  ErrorCtor,
  FunctionPrototypeHasInstance,
  JSONParse,
  JSONStringify,
  MathMax,
  NumberParseInt,
  ObjectDefineProperty,
  ObjectFreeze,
  ObjectGetOwnPropertyNames,
  ObjectHasOwn,
  ObjectIsFrozen,
  PromiseCtor,
  PromisePrototypeThen,
  RangeErrorCtor,
  ReflectApply,
  StringPrototypeCharCodeAt,
  StringPrototypeIncludes,
  StringPrototypeIndexOf,
  StringPrototypeSlice,
  StringPrototypeStartsWith,
  StringPrototypeTrim,
  TypeErrorCtor,
  accessorDescriptor,
  dataDescriptor,
  globalObject,
  isError,
  newList,
  newRecord,
  readOwn,
  splitLines,
} from './primordials.js';

/** The isolated-vm Reference to the worker's host-call function, as seen inside the isolate. */
interface HostReference {
  applySync(receiver: undefined, args: [string]): string;
}

/** The worker's function that sends a call without waiting: the call's id, or a JSON error reply. */
interface AsyncHostReference {
  applySync(receiver: undefined, args: [string]): number | string;
}

/** A call sent by callHostAsync whose reply has not come yet. */
interface AsyncCall {
  resolve: (value: unknown) => void;
  reject: (reason: unknown) => void;
  /** Turns the reply's value into what the promise resolves to (tool_handler: the result text). */
  present: (value: unknown) => unknown;
  /** The call as model code wrote it (`tools.search`, `tool_handler("search")`), for the unawaited-calls note. */
  shownAs: string;
}

type ToolHandlerFunction = (name: string, args: Record<string, unknown>) => unknown;
type ErrorReport = { name: string; message: string; stack: string };

/** Kinds of unawaited calls a note names one by one; the rest are counted. */
const UNAWAITED_KINDS_SHOWN = 5;

const FROZEN = { writable: false, enumerable: false, configurable: false } as const;

export function install(host: HostReference, hostAsync: AsyncHostReference, limitsJson: string) {
  'use strict';
  const limits = JSONParse(limitsJson) as HostCallLimits;
  const globalNames = newRecord<true>();
  const scaffoldValues = newRecord<unknown>();
  // A model may assign to a scaffold name inside a block; the assignment is visible for the rest
  // of that block only, so a later block always sees the real function or context again.
  let blockOverrides = newRecord<unknown>();

  let output = '';
  let droppedChars = 0;
  let outputLimit = 20_000;
  let finalAnswer: string | undefined;
  let wrapperFrame = '';
  let columnShifts: [number, number, number][] = newList();
  let outcome: { state: 'pending' } | { state: 'fulfilled'; value: unknown } | { state: 'rejected'; error: unknown } = {
    state: 'pending',
  };

  function defineScaffold(name: string, value: unknown) {
    scaffoldValues[name] = value;
    if (globalNames[name]) return;
    const getter = () => (name in blockOverrides ? blockOverrides[name] : scaffoldValues[name]);
    const setter = (replacement: unknown) => {
      blockOverrides[name] = replacement;
    };
    try {
      ObjectDefineProperty(globalObject, name, accessorDescriptor(getter, setter));
    } catch {
      throw new TypeErrorCtor(
        `${name} cannot be loaded: model code already defined a variable with that name that cannot be replaced. ` +
          'Start a new session, or use a name other than context_N and history_N for variables.',
      );
    }
    globalNames[name] = true;
  }

  let sessionNamesReserved = false;
  function reserveSessionNames() {
    sessionNamesReserved = true;
    for (let prefixIndex = 0; prefixIndex < SESSION_NAME_PREFIXES.length; prefixIndex++) {
      for (let index = 0; index < RESERVED_SESSION_NAMES; index++) {
        const name = `${SESSION_NAME_PREFIXES[prefixIndex]}${index}`;
        if (!globalNames[name]) defineScaffold(name, undefined);
      }
    }
  }

  function isSessionName(name: string) {
    for (let index = 0; index < SESSION_NAME_PREFIXES.length; index++) {
      if (StringPrototypeStartsWith(name, SESSION_NAME_PREFIXES[index]!)) return true;
    }
    return false;
  }

  // ---- output ----------------------------------------------------------------------------------

  function write(text: string) {
    const room = outputLimit - output.length;
    if (room <= 0) {
      droppedChars += text.length;
      return;
    }
    const kept = text.length <= room ? text : StringPrototypeSlice(text, 0, room);
    output += kept;
    droppedChars += text.length - kept.length;
  }

  function printLine(args: unknown[]) {
    const parts = newList<string>();
    for (let index = 0; index < args.length; index++) ArrayPrototypePush(parts, cleanInspect(args[index]));
    write(`${ArrayPrototypeJoin(parts, ' ')}\n`);
  }

  function cleanInspect(value: unknown): string {
    return isError(value) ? describeError(value).stack : inspect(value);
  }

  function print(...args: unknown[]) {
    printLine(args);
  }

  const log = (...args: unknown[]) => printLine(args);
  const console = ObjectFreeze({
    log,
    info: log,
    warn: log,
    error: log,
    debug: log,
    trace: log,
    dir: (value: unknown) => printLine([value]),
    table: (value: unknown) => printLine([value]),
  });

  // ---- final answers ---------------------------------------------------------------------------

  function serializeFinal(value: unknown): string {
    if (typeof value === 'string') return value;
    if (value !== null && typeof value === 'object') {
      try {
        return toJsonText(value, limits);
      } catch {
        // Cycles, functions and BigInts cannot be JSON: fall back to the printed form.
      }
    }
    return inspect(value);
  }

  // A forgotten `await` (asynchronous tools return promises) or a variable its block never set
  // must reach the model as an error it can fix, never the user as the answer "[object Promise]"
  // or "undefined". Both checks read descriptors only (isPromiseLike), and run in the block's time.
  function FINAL(...args: unknown[]) {
    if (args.length === 0) throw new TypeErrorCtor('FINAL(answer) needs the answer as its argument.');
    finalAnswer = acceptedFinal(args[0], 'FINAL', 'FINAL(await x)');
  }

  function acceptedFinal(value: unknown, caller: string, awaited: string): string {
    if (isPromiseLike(value) || (typeof value === 'string' && StringPrototypeTrim(value) === '[object Promise]')) {
      throw new TypeErrorCtor(
        `${caller} got a Promise, not its value: await it first: ${awaited}. ` +
          'Calls to asynchronous tools (tools.NAME) and async functions return promises.',
      );
    }
    if (value === undefined) {
      throw new TypeErrorCtor(`${caller} got undefined, not an answer: pass the answer itself (a function without return, or a variable never set, gives undefined).`);
    }
    return serializeFinal(value);
  }

  function FINAL_VAR(...args: unknown[]) {
    if (args.length === 0) throw new TypeErrorCtor('FINAL_VAR(name) needs a variable name or a value.');
    const nameOrValue = args[0];
    if (typeof nameOrValue !== 'string') {
      finalAnswer = acceptedFinal(nameOrValue, 'FINAL_VAR', 'FINAL_VAR(await x)');
      return;
    }
    const name = StringPrototypeTrim(nameOrValue);
    const shownName = JSONStringify(clip(name, REPORT_LIMITS.variableNameChars));
    if (!isUserVariable(name) && !globalNames[name]) {
      const known = listVariables();
      write(
        `FINAL_VAR error: no variable named ${shownName}. ` +
          (known.total > 0 ? `Defined variables: ${namesOf(known)}. ` : 'No variables are defined yet. ') +
          'Assign the answer to a variable first, or call FINAL(value). The run continues.\n',
      );
      return;
    }
    const value = (globalObject as Record<string, unknown>)[name];
    if (value === undefined) {
      write(
        `FINAL_VAR error: the variable ${shownName} is undefined, so it holds no answer (was the block that sets it stopped by an error?). ` +
          'Assign the answer to it first, or call FINAL(value). The run continues.\n',
      );
      return;
    }
    finalAnswer = acceptedFinal(value, `FINAL_VAR(${shownName})`, `FINAL(await ${clip(name, REPORT_LIMITS.variableNameChars)})`);
  }

  // ---- variables -------------------------------------------------------------------------------

  const builtinNames = newRecord<true>();
  function isUserVariable(name: string) {
    return ObjectHasOwn(globalObject, name) && !builtinNames[name] && !globalNames[name];
  }

  /** The model's variables, sorted, at most REPORT_LIMITS.variables of them, with the total. */
  function listVariables(): { shown: { name: string; type: string }[]; total: number } {
    const all = ObjectGetOwnPropertyNames(globalObject);
    const names = newList<string>();
    for (let index = 0; index < all.length; index++) if (isUserVariable(all[index]!)) ArrayPrototypePush(names, all[index]!);
    ArrayPrototypeSort(names);
    const shown = newList<{ name: string; type: string }>();
    const count = names.length < REPORT_LIMITS.variables ? names.length : REPORT_LIMITS.variables;
    for (let index = 0; index < count; index++) {
      const name = names[index]!;
      let type: string;
      try {
        type = describeType((globalObject as Record<string, unknown>)[name]);
      } catch {
        type = 'unknown';
      }
      const variable = newRecord<string>();
      variable.name = clip(name, REPORT_LIMITS.variableNameChars);
      variable.type = clip(type, REPORT_LIMITS.variableTypeChars);
      ArrayPrototypePush(shown, variable as { name: string; type: string });
    }
    return { shown, total: names.length };
  }

  function namesOf(variables: { shown: { name: string }[]; total: number }): string {
    const names = newList<string>();
    for (let index = 0; index < variables.shown.length; index++) ArrayPrototypePush(names, variables.shown[index]!.name);
    const more = variables.total - variables.shown.length;
    return `${ArrayPrototypeJoin(names, ', ')}${more > 0 ? ` and ${more} more` : ''}`;
  }

  function SHOW_VARS() {
    const variables = listVariables();
    if (variables.total === 0) {
      write('No variables defined yet.\n');
      return;
    }
    const lines = newList<string>();
    for (let index = 0; index < variables.shown.length; index++) {
      const variable = variables.shown[index]!;
      ArrayPrototypePush(lines, `  ${variable.name}: ${variable.type}`);
    }
    const more = variables.total - variables.shown.length;
    if (more > 0) ArrayPrototypePush(lines, `  ... and ${more} more`);
    write(`Variables:\n${ArrayPrototypeJoin(lines, '\n')}\n`);
  }

  // ---- host calls ------------------------------------------------------------------------------

  /** `label` names the call in errors the way model code wrote it (tool_handler, tools.NAME). */
  function callHost(kind: string, payload: Record<string, unknown>, label = kind): unknown {
    return replyValue(host.applySync(undefined, [requestText(kind, payload, label)]));
  }

  function requestText(kind: string, payload: Record<string, unknown>, label: string): string {
    payload.kind = kind;
    try {
      return toJsonText(payload, limits);
    } catch (error) {
      const reason = isError(error) ? describeError(error).message : 'the value cannot be read';
      if (FunctionPrototypeHasInstance(RangeErrorCtor, error)) {
        throw new RangeErrorCtor(`${label}: ${reason}. Split the data across several calls, or send less (a slice, a summary).`);
      }
      throw new TypeErrorCtor(`${label}: the arguments cannot be sent to the host (${reason}). Pass plain strings, numbers, arrays and objects.`);
    }
  }

  /** The value a host reply carries; a failed call throws an Error with the host's name and message. */
  function replyValue(replyJson: string): unknown {
    const reply = JSONParse(replyJson) as object;
    if (readOwn(reply, 'ok') === true) return readOwn(reply, 'value');
    const failure = readOwn(reply, 'error') as object;
    const error = new ErrorCtor(readOwnString(failure, 'message') ?? 'the host call failed');
    ObjectDefineProperty(error, 'name', dataDescriptor(readOwnString(failure, 'name') ?? 'Error', { writable: true, enumerable: false, configurable: true }));
    throw error;
  }

  // Calls of the running block sent by callHostAsync, by id, until the worker delivers their replies.
  let asyncCalls = newRecord<AsyncCall>();

  /**
   * Sends a call without waiting for it and returns a promise of its value, so a block can have
   * several calls in flight at once. The worker delivers the reply (settleAsync) once the block
   * awaits. The promise comes from the captured Promise constructor: nothing model code changed on
   * Promise takes part in settling it.
   */
  function callHostAsync(kind: string, payload: Record<string, unknown>, label: string, present: (value: unknown) => unknown): Promise<unknown> {
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
    if (typeof ticket === 'number') asyncCalls[ticket] = call;
    else settleCall(call, ticket);
    return promise;
  }

  // Replies come in whatever order the host answers, so a call's failure may arrive while the block
  // still awaits an earlier call (`const a = tools.x(); const b = tools.y(); await a; await b`).
  // It must wait for the block's own await of it, not end the block as an unhandled rejection. An
  // own undefined `constructor` keeps `then` from taking a species constructor from anything model
  // code can reach, for exactly the moment it looks.
  function markHandled(promise: Promise<unknown>) {
    ObjectDefineProperty(promise, 'constructor', dataDescriptor(undefined, { writable: true, enumerable: false, configurable: true }));
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
    ObjectDefineProperty(value, 'then', dataDescriptor(undefined, { writable: true, enumerable: false, configurable: true }));
    resolve(value);
    delete (value as { then?: unknown }).then;
  }

  // The second argument of every query function: a model name, or an options object. Only the
  // options' own properties count: a polluted Object.prototype.model must not reroute queries.
  function optionsObject(kind: string, options: unknown): object | undefined {
    if (options === undefined || options === null || typeof options === 'string') return undefined;
    if (typeof options !== 'object' || ArrayIsArray(options)) {
      throw new TypeErrorCtor(`${kind}: the second argument must be a model name or an options object.`);
    }
    return options;
  }

  function modelOption(kind: string, options: unknown): unknown {
    const object = optionsObject(kind, options);
    return object === undefined ? (options ?? undefined) : readOwn(object, 'model');
  }

  function queryOptions(kind: string, options: unknown): { payload: Record<string, unknown>; handler: ToolHandlerFunction | undefined } {
    const payload = newRecord<unknown>();
    payload.model = modelOption(kind, options);
    const object = optionsObject(kind, options);
    if (object === undefined) return { payload, handler: undefined };
    payload.response_format = readOwn(object, 'response_format');
    payload.tool_choice = readOwn(object, 'tool_choice');
    const tools = readOwn(object, 'tools');
    if (tools === undefined || tools === null) return { payload, handler: undefined };
    const handler = readOwn(object, 'tool_handler');
    if (typeof handler !== 'function') {
      throw new TypeErrorCtor(`${kind}: tool_handler is required when tools are provided (a function (name, args) => result).`);
    }
    payload.tools = tools;
    return { payload, handler: handler as ToolHandlerFunction };
  }

  // With tools, the host runs the tool-calling loop and hands each round of tool calls back here,
  // because the handler is sandbox code and only sandbox code can call it.
  function queryWithTools(kind: string, payload: Record<string, unknown>, handler: ToolHandlerFunction): unknown {
    let reply = callHost(kind, payload) as object;
    while (readOwn(reply, 'done') !== true) {
      const results = newList<Record<string, unknown>>();
      const requests = readOwn(reply, 'requests') as Extract<ToolHandBackReply, { done: false }>['requests'];
      for (let index = 0; index < requests.length; index++) {
        const request = requests[index]!;
        const result = newRecord<unknown>();
        result.id = request.id;
        result.output = runToolHandler(handler, request.name, request.arguments);
        ArrayPrototypePush(results, result);
      }
      const next = newRecord<unknown>();
      next.handBack = readOwn(reply, 'handBack');
      next.results = results;
      reply = callHost('tool_results', next) as object;
    }
    return readOwn(reply, 'value');
  }

  function runToolHandler(handler: ToolHandlerFunction, name: string, args: Record<string, unknown>): string {
    try {
      const value = ReflectApply(handler, undefined, [name, args]);
      if (FunctionPrototypeHasInstance(PromiseCtor, value)) {
        throw new TypeErrorCtor('the tool handler returned a Promise; write it as a normal function (llm_query and synchronous tools work inside it, asynchronous tools do not)');
      }
      return toolText(value);
    } catch (error) {
      return toolErrorText(name, isError(error) ? (readOwnString(error, 'message') ?? '') : inspect(error));
    }
  }

  function toolText(value: unknown): string {
    return toolOutputText(value, (data) => toJsonText(data, limits));
  }

  function checkPrompt(kind: string, prompt: unknown) {
    if (typeof prompt !== 'string' && !ArrayIsArray(prompt)) {
      throw new TypeErrorCtor(`${kind}: the prompt must be a string or an array of chat messages, got ${describeType(prompt)}.`);
    }
  }

  function checkPrompts(kind: string, prompts: unknown) {
    if (!ArrayIsArray(prompts)) throw new TypeErrorCtor(`${kind}: expected an array of prompts, got ${describeType(prompts)}.`);
    if (prompts.length > limits.maxBatchItems) {
      throw new RangeErrorCtor(
        `${kind}: at most ${limits.maxBatchItems} prompts fit in one call, got ${prompts.length}. Split the batch into several calls.`,
      );
    }
    for (let index = 0; index < prompts.length; index++) checkPrompt(`${kind}[${index}]`, prompts[index]);
  }

  function llm_query(prompt: unknown, options?: unknown) {
    checkPrompt('llm_query', prompt);
    const { payload, handler } = queryOptions('llm_query', options);
    payload.prompt = prompt;
    return handler ? queryWithTools('llm_query', payload, handler) : callHost('llm_query', payload);
  }
  function llm_query_batched(prompts: unknown, options?: unknown) {
    checkPrompts('llm_query_batched', prompts);
    const { payload, handler } = queryOptions('llm_query_batched', options);
    payload.prompts = prompts;
    return handler ? queryWithTools('llm_query_batched', payload, handler) : callHost('llm_query_batched', payload);
  }
  function rlm_query(prompt: unknown, options?: unknown) {
    checkPrompt('rlm_query', prompt);
    const payload = newRecord<unknown>();
    payload.prompt = prompt;
    payload.model = modelOption('rlm_query', options);
    return callHost('rlm_query', payload);
  }
  function rlm_query_batched(prompts: unknown, options?: unknown) {
    checkPrompts('rlm_query_batched', prompts);
    const payload = newRecord<unknown>();
    payload.prompts = prompts;
    payload.model = modelOption('rlm_query_batched', options);
    return callHost('rlm_query_batched', payload);
  }
  // Tools the host answers asynchronously (see setTools): calling one returns a promise.
  let asyncToolNames = newRecord<true>();
  function toolPayload(name: string, args: unknown): Record<string, unknown> {
    const payload = newRecord<unknown>();
    payload.name = name;
    payload.arguments = args ?? newRecord();
    return payload;
  }
  function tool_handler(name: unknown, args?: unknown) {
    if (typeof name !== 'string') throw new TypeErrorCtor(`tool_handler: the tool name must be a string, got ${describeType(name)}.`);
    if (asyncToolNames[name] === true) return callHostAsync('tool_call', toolPayload(name, args), 'tool_handler', toolText);
    return toolText(callHost('tool_call', toolPayload(name, args), 'tool_handler'));
  }
  function toolFunction(name: string): (args?: unknown) => unknown {
    const label = `tools.${name}`;
    if (asyncToolNames[name] === true) return (args?: unknown) => callHostAsync('tool_call', toolPayload(name, args), label, sameValue);
    return (args?: unknown) => callHost('tool_call', toolPayload(name, args), label);
  }

  const scaffold: Record<string, unknown> = {
    print,
    console,
    FINAL,
    FINAL_VAR,
    SHOW_VARS,
    llm_query,
    llm_query_batched,
    rlm_query,
    rlm_query_batched,
    tool_handler,
    context: undefined,
  };
  const scaffoldNames = ObjectGetOwnPropertyNames(scaffold);
  for (let index = 0; index < scaffoldNames.length; index++) defineScaffold(scaffoldNames[index]!, scaffold[scaffoldNames[index]!]);
  // Every rewritten block hands its promise to this hook in the same script, so a rejection is
  // handled before the microtask checkpoint (isolated-vm rethrows unhandled rejections).
  ObjectDefineProperty(globalObject, BLOCK_HOOK, dataDescriptor(watchBlock, FROZEN));
  // Atomics.wait would park the isolate thread outside any timeout's reach; nothing in a
  // single-threaded sandbox needs it.
  ObjectDefineProperty(Atomics, 'wait', dataDescriptor(undefined, FROZEN));
  // The garbage collector, exposed by the worker's --expose-gc, is the prelude's: the worker runs it
  // after a block that left the heap nearly full. Model code has no use for it.
  // (V8 makes it non-configurable, so it is emptied rather than deleted.)
  const collectGarbage = (globalObject as { gc?: () => void }).gc;
  (globalObject as { gc?: unknown }).gc = undefined;
  // WebAssembly memories live outside the isolate's heap limit (two of them took a worker far past
  // a 64 MB limit), and nothing model code does needs them.
  delete (globalObject as { WebAssembly?: unknown }).WebAssembly;
  const initialNames = ObjectGetOwnPropertyNames(globalObject);
  for (let index = 0; index < initialNames.length; index++) builtinNames[initialNames[index]!] = true;

  function watchBlock(promise: Promise<unknown>) {
    // `then` would take a species constructor from promise.constructor, which model code can reach
    // through Promise.prototype; an own undefined `constructor` makes it use the built-in Promise.
    ObjectDefineProperty(promise, 'constructor', dataDescriptor(undefined, FROZEN));
    PromisePrototypeThen(
      promise,
      (value) => {
        outcome = { state: 'fulfilled', value };
      },
      (error) => {
        outcome = { state: 'rejected', error };
      },
    );
  }

  // Scaffold values are shared by every block: nothing inside them may be changed by model code.
  // Iterative, so deeply nested JSON cannot overflow the stack.
  function deepFreeze<T>(value: T): T {
    const pending = newList<unknown>();
    ArrayPrototypePush(pending, value);
    while (pending.length > 0) {
      const item = pending[pending.length - 1];
      pending.length -= 1;
      if (item === null || typeof item !== 'object' || ObjectIsFrozen(item)) continue;
      ObjectFreeze(item);
      const keys = ObjectGetOwnPropertyNames(item);
      for (let index = 0; index < keys.length; index++) ArrayPrototypePush(pending, (item as Record<string, unknown>)[keys[index]!]);
    }
    return value;
  }

  // ---- errors ----------------------------------------------------------------------------------

  function describeError(error: unknown): ErrorReport {
    if (isError(error)) {
      const name = clip(readOwnString(error, 'name') ?? 'Error', REPORT_LIMITS.errorNameChars);
      const message = clip(readOwnString(error, 'message') ?? '', REPORT_LIMITS.errorMessageChars);
      const rawStack = readOwnString(error, 'stack');
      const header = message ? `${name}: ${message}` : name;
      return { name, message, stack: rawStack ? cleanStack(rawStack, header) : header };
    }
    const shown = clip(inspect(error), REPORT_LIMITS.errorMessageChars);
    return { name: 'Uncaught', message: shown, stack: `Uncaught ${shown}` };
  }

  // Only frames in model code are useful (and safe) to show: drop the prelude and isolate plumbing.
  function cleanStack(stack: string, header: string): string {
    const kept = newList<string>();
    ArrayPrototypePush(kept, header);
    const lines = splitLines(stack);
    for (let index = 0; index < lines.length && kept.length <= REPORT_LIMITS.stackFrames; index++) {
      const line = lines[index]!;
      if (!StringPrototypeStartsWith(StringPrototypeTrim(line), 'at ') || !StringPrototypeIncludes(line, `${BLOCK_FILENAME}:`)) continue;
      if (StringPrototypeIncludes(line, wrapperFrame)) continue;
      ArrayPrototypePush(kept, clip(mapBlockPosition(line), REPORT_LIMITS.stackLineChars));
    }
    return ArrayPrototypeJoin(kept, '\n');
  }

  /** Rewrites `block:ROW:COLUMN` in a stack line to the column the model wrote. */
  function mapBlockPosition(line: string): string {
    const marker = `${BLOCK_FILENAME}:`;
    const at = StringPrototypeIndexOf(line, marker);
    const row = readDigits(line, at + marker.length);
    if (at === -1 || row.end === at + marker.length || StringPrototypeCharCodeAt(line, row.end) !== 58 /* : */) return line;
    const column = readDigits(line, row.end + 1);
    if (column.end === row.end + 1) return line;
    const mapped = originalColumn(row.value, column.value);
    return `${StringPrototypeSlice(line, 0, at)}${marker}${row.value}:${mapped}${StringPrototypeSlice(line, column.end)}`;
  }

  function readDigits(text: string, start: number): { value: number; end: number } {
    let end = start;
    for (let code = StringPrototypeCharCodeAt(text, end); code >= 48 && code <= 57; code = StringPrototypeCharCodeAt(text, end)) end++;
    return { value: end > start ? NumberParseInt(StringPrototypeSlice(text, start, end), 10) : 0, end };
  }

  // Maps a 1-based column of the rewritten block back to the column the model wrote.
  function originalColumn(row: number, column: number): number {
    let shift = 0;
    let editEnd = 0;
    for (let index = 0; index < columnShifts.length; index++) {
      const edit = columnShifts[index]!;
      if (edit[0] === row && edit[1] <= column - 1) {
        shift = edit[2];
        editEnd = edit[1];
      }
    }
    return MathMax(column - shift, editEnd - shift + 1, 1);
  }

  // ---- the block report --------------------------------------------------------------------------

  function pendingError(): ErrorReport {
    const message =
      'The block ended while still awaiting a promise that nothing can settle (there are no timers or ' +
      'background tasks in the sandbox). Await only llm_query/tool results or promises your code resolves.';
    return { name: 'PendingPromiseError', message, stack: '' };
  }

  /**
   * The block report. Describing the error, showing the trailing value and listing variables can
   * run model code (Proxy traps, getters), so the worker runs this under the block's time limit and
   * falls back to `outputReport` when it fails.
   */
  function collect(showResult: boolean): string {
    let error: ErrorReport | undefined;
    if (outcome.state === 'rejected') error = describeThrown(outcome.error);
    else if (outcome.state === 'pending') error = pendingError();
    else if (showResult && outcome.value !== undefined) write(`${showValue(outcome.value)}\n`);
    // A pending block may still be awaiting its calls (it timed out); one that ended never will.
    const unawaited = outcome.state === 'pending' ? undefined : unawaitedCalls();
    if (unawaited !== undefined && finalAnswer !== undefined) {
      finalAnswer = undefined;
      error ??= unawaitedFinalError();
    }
    blockOverrides = newRecord();
    const variables = listVariables();
    const report = newRecord<unknown>();
    report.stdout = output;
    report.droppedChars = droppedChars;
    if (error) report.error = plainRecord(error);
    report.final = finalAnswer;
    if (unawaited !== undefined) report.note = unawaitedNote(unawaited);
    report.variables = variables.shown;
    report.omittedVariables = variables.total - variables.shown.length;
    return toJsonText(report, { maxChars: 2 ** 53, maxDepth: 4 });
  }

  // A thrown Proxy's traps may throw in turn: the report must still be made.
  function describeThrown(error: unknown): ErrorReport {
    try {
      return describeError(error);
    } catch {
      return { name: 'Uncaught', message: 'the block threw a value that cannot be described', stack: 'Uncaught (a value that cannot be described)' };
    }
  }

  function showValue(value: unknown): string {
    try {
      return typeof value === 'string' ? JSONStringify(value) : cleanInspect(value);
    } catch {
      return '[a value that cannot be shown]';
    }
  }

  /** What the prelude holds as plain strings, for a block whose full report could not be made. */
  function outputReport(): string {
    const report = newRecord<unknown>();
    report.stdout = output;
    report.droppedChars = droppedChars;
    report.final = finalAnswer;
    report.variables = newList();
    report.omittedVariables = 0;
    return toJsonText(report, { maxChars: 2 ** 53, maxDepth: 4 });
  }

  /**
   * Asynchronous calls the block made but whose replies it never took, by how model code wrote
   * them ("2 calls to tools.search"); undefined when there are none. Their replies, if any come,
   * are dropped by the worker: the results are lost.
   */
  function unawaitedCalls(): string | undefined {
    const ids = ObjectGetOwnPropertyNames(asyncCalls);
    if (ids.length === 0) return undefined;
    const counts = newRecord<number>();
    const order = newList<string>();
    for (let index = 0; index < ids.length; index++) {
      const shownAs = asyncCalls[ids[index]!]!.shownAs;
      if (counts[shownAs] === undefined) ArrayPrototypePush(order, shownAs);
      counts[shownAs] = (counts[shownAs] ?? 0) + 1;
    }
    const parts = newList<string>();
    const shown = order.length < UNAWAITED_KINDS_SHOWN ? order.length : UNAWAITED_KINDS_SHOWN;
    for (let index = 0; index < shown; index++) {
      const count = counts[order[index]!]!;
      ArrayPrototypePush(parts, `${count} call${count === 1 ? '' : 's'} to ${clip(order[index]!, REPORT_LIMITS.variableNameChars)}`);
    }
    if (order.length > shown) ArrayPrototypePush(parts, `calls to ${order.length - shown} more tools`);
    return ArrayPrototypeJoin(parts, ', ');
  }

  function unawaitedNote(calls: string): string {
    return (
      `Note: this block never awaited ${calls}: it ended without the results, which are lost. ` +
      'Await every call in the block that needs its result: const rows = await tools.NAME(args), or await Promise.all([...]) for several at once.'
    );
  }

  function unawaitedFinalError(): ErrorReport {
    const message =
      'FINAL was not accepted: this block ended with tool calls it never awaited, so their results were lost. ' +
      'Await them, then call FINAL with what they return.';
    return { name: 'UnawaitedCallError', message, stack: '' };
  }

  function plainRecord(error: ErrorReport): Record<string, unknown> {
    const record = newRecord<unknown>();
    record.name = error.name;
    record.message = error.message;
    record.stack = error.stack;
    return record;
  }

  // ---- the controller the worker drives ------------------------------------------------------------

  return ObjectFreeze({
    setGlobal(name: string, value: unknown, format: 'text' | 'json') {
      if (!sessionNamesReserved && isSessionName(name)) reserveSessionNames();
      defineScaffold(name, format === 'json' ? deepFreeze(JSONParse(value as string)) : value);
    },
    // Host tools: TOOLS holds their OpenAI schemas (for llm_query's `tools` option), and
    // tools.NAME(args) calls one and returns its result as a value (a promise of it for the
    // asynchronous ones).
    setTools(specsJson: string, asyncNamesJson: string) {
      const specs = JSONParse(specsJson) as { function: { name: string } }[];
      const asyncNames = JSONParse(asyncNamesJson) as string[];
      asyncToolNames = newRecord<true>();
      for (let index = 0; index < asyncNames.length; index++) asyncToolNames[asyncNames[index]!] = true;
      const callable = newRecord<(args?: unknown) => unknown>();
      for (let index = 0; index < specs.length; index++) {
        const name = specs[index]!.function.name;
        callable[name] = toolFunction(name);
      }
      defineScaffold('TOOLS', deepFreeze(specs));
      defineScaffold('tools', ObjectFreeze(callable));
    },
    beginBlock(limit: number, wrapperLine: number, columnShiftsJson: string) {
      wrapperFrame = `${BLOCK_FILENAME}:${wrapperLine}:`;
      columnShifts = JSONParse(columnShiftsJson) as [number, number, number][];
      output = '';
      droppedChars = 0;
      outputLimit = limit;
      finalAnswer = undefined;
      blockOverrides = newRecord();
      outcome = { state: 'pending' };
      asyncCalls = newRecord();
    },
    blockPending() {
      return outcome.state === 'pending';
    },
    // A reply to a call from callHostAsync: settles its promise. The worker calls this when the
    // block has awaited; the isolate's microtasks run right after, so the block goes on.
    settleAsync(id: number, replyJson: string) {
      const call = asyncCalls[id];
      if (call === undefined) return;
      delete asyncCalls[id];
      settleCall(call, replyJson);
    },
    collect,
    outputReport,
    collectGarbage() {
      collectGarbage?.();
    },
  });
}

function sameValue(value: unknown): unknown {
  return value;
}

function ignore(): void {}

/** Cuts text to `max` characters, saying how much was cut. */
function clip(text: string, max: number): string {
  return text.length <= max ? text : `${StringPrototypeSlice(text, 0, max)}... (${text.length - max} more chars)`;
}
