// The prelude runs inside every sandbox isolate before any model code. It installs the scaffold
// globals (print, console, FINAL, FINAL_VAR, SHOW_VARS, llm_query, ...) and the controller the
// worker process uses to run blocks. The single host reference it receives stays in this closure:
// no global, property or stack frame reachable from model code ever holds it.
import { toolErrorText, toolOutputText } from '../src/lm/tool-text.js';
import { describeType, inspect, readOwnString } from './inspect.js';
import {
  ArrayIsArray,
  ArrayPrototypeFilter,
  ArrayPrototypeJoin,
  ArrayPrototypePush,
  ArrayPrototypeSort,
  ErrorCtor,
  JSONParse,
  JSONStringify,
  ObjectCreate,
  ObjectDefineProperty,
  ObjectFreeze,
  ObjectIsFrozen,
  ObjectGetOwnPropertyNames,
  ObjectPrototypeHasOwnProperty,
  PromisePrototypeThen,
  ReflectApply,
  RegExpPrototypeTest,
  StringPrototypeIncludes,
  StringPrototypeReplace,
  StringPrototypeSlice,
  NumberParseInt,
  MathMax,
  StringPrototypeSplit,
  StringPrototypeTrim,
  TypeErrorCtor,
  globalObject,
} from './primordials.js';

/** The isolated-vm Reference to the worker's host-call function, as seen inside the isolate. */
interface HostReference {
  applySync(receiver: undefined, args: [string]): string;
}

type HostReply = { ok: true; value: unknown } | { ok: false; error: { name: string; message: string } };

export const PRELUDE_FILENAME = 'rlm-prelude';
const BLOCK_FILENAME = 'block';
/** Must match BLOCK_HOOK in src/sandbox/rewrite.ts. */
const BLOCK_HOOK = '__rlm_block__';
const STACK_FRAME = /^\s*at /;
const BLOCK_POSITION = /block:(\d+):(\d+)/;

export function install(host: HostReference) {
  'use strict';
  const globalNames: Record<string, true> = ObjectCreate(null);
  const scaffoldValues: Record<string, unknown> = ObjectCreate(null);
  // A model may assign to a scaffold name inside a block; the assignment is visible for the rest
  // of that block only, so a later block always sees the real function or context again.
  let blockOverrides: Record<string, unknown> = ObjectCreate(null);

  let output: string[] = [];
  let outputLength = 0;
  let droppedChars = 0;
  let outputLimit = 20_000;
  let finalAnswer: string | undefined;
  let wrapperFrame = '';
  let columnShifts: [number, number, number][] = [];
  let outcome: { state: 'pending' } | { state: 'fulfilled'; value: unknown } | { state: 'rejected'; error: unknown } = {
    state: 'pending',
  };

  function defineScaffold(name: string, value: unknown) {
    scaffoldValues[name] = value;
    if (globalNames[name]) return;
    globalNames[name] = true;
    ObjectDefineProperty(globalObject, name, {
      configurable: false,
      enumerable: false,
      get: () => (name in blockOverrides ? blockOverrides[name] : scaffoldValues[name]),
      set: (replacement: unknown) => {
        blockOverrides[name] = replacement;
      },
    });
  }

  function write(text: string) {
    const room = outputLimit - outputLength;
    if (room <= 0) {
      droppedChars += text.length;
      return;
    }
    const kept = text.length <= room ? text : StringPrototypeSlice(text, 0, room);
    ArrayPrototypePush(output, kept);
    outputLength += kept.length;
    droppedChars += text.length - kept.length;
  }

  function printLine(args: unknown[]) {
    const parts: string[] = [];
    for (let index = 0; index < args.length; index++) ArrayPrototypePush(parts, cleanInspect(args[index]));
    write(`${ArrayPrototypeJoin(parts, ' ')}\n`);
  }

  function cleanInspect(value: unknown): string {
    if (value instanceof ErrorCtor) return describeError(value).stack;
    return inspect(value);
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

  // ---- final answers -------------------------------------------------------------------------

  function serializeFinal(value: unknown): string {
    if (typeof value === 'string') return value;
    if (value !== null && typeof value === 'object') {
      try {
        const json = JSONStringify(value);
        if (typeof json === 'string') return json;
      } catch {
        // Cycles and BigInts cannot be JSON: fall back to the printed form.
      }
    }
    return inspect(value);
  }

  function FINAL(...args: unknown[]) {
    if (args.length === 0) throw new TypeErrorCtor('FINAL(answer) needs the answer as its argument.');
    finalAnswer = serializeFinal(args[0]);
  }

  function FINAL_VAR(...args: unknown[]) {
    if (args.length === 0) throw new TypeErrorCtor('FINAL_VAR(name) needs a variable name or a value.');
    const nameOrValue = args[0];
    if (typeof nameOrValue !== 'string') {
      finalAnswer = serializeFinal(nameOrValue);
      return;
    }
    const name = StringPrototypeTrim(nameOrValue);
    if (!isUserVariable(name) && !globalNames[name]) {
      const known = userVariableNames();
      write(
        `FINAL_VAR error: no variable named ${JSONStringify(name)}. ` +
          (known.length ? `Defined variables: ${ArrayPrototypeJoin(known, ', ')}. ` : 'No variables are defined yet. ') +
          'Assign the answer to a variable first, or call FINAL(value). The run continues.\n',
      );
      return;
    }
    finalAnswer = serializeFinal((globalObject as Record<string, unknown>)[name]);
  }

  // ---- variables -----------------------------------------------------------------------------

  const builtinNames: Record<string, true> = ObjectCreate(null);
  function isUserVariable(name: string) {
    return ObjectPrototypeHasOwnProperty(globalObject, name) && !builtinNames[name] && !globalNames[name];
  }
  function userVariableNames(): string[] {
    return ArrayPrototypeSort(ArrayPrototypeFilter(ObjectGetOwnPropertyNames(globalObject), isUserVariable));
  }
  function listVariables() {
    const variables: { name: string; type: string }[] = [];
    for (const name of userVariableNames()) {
      let type: string;
      try {
        type = describeType((globalObject as Record<string, unknown>)[name]);
      } catch {
        type = 'unknown';
      }
      ArrayPrototypePush(variables, { name, type });
    }
    return variables;
  }

  function SHOW_VARS() {
    const variables = listVariables();
    if (variables.length === 0) {
      write('No variables defined yet.\n');
      return;
    }
    const lines: string[] = [];
    for (const variable of variables) ArrayPrototypePush(lines, `  ${variable.name}: ${variable.type}`);
    write(`Variables:\n${ArrayPrototypeJoin(lines, '\n')}\n`);
  }

  // ---- host calls ----------------------------------------------------------------------------

  function toJson(kind: string, payload: Record<string, unknown>): string {
    try {
      const json = JSONStringify({ kind, ...payload }, (_key, value: unknown) => {
        if (typeof value === 'symbol') throw new TypeErrorCtor('a Symbol cannot be sent');
        if (typeof value === 'function') throw new TypeErrorCtor('a function cannot be sent');
        return value;
      });
      if (typeof json !== 'string') throw new TypeErrorCtor('nothing to send');
      return json;
    } catch (error) {
      const reason = error instanceof ErrorCtor ? describeError(error).message : 'the value cannot be read';
      throw new TypeErrorCtor(`${kind}: arguments cannot be sent to the host (${reason}). Pass plain strings, numbers, arrays and objects.`);
    }
  }

  function callHost(kind: string, payload: Record<string, unknown>): unknown {
    const request = toJson(kind, payload);
    const reply = JSONParse(host.applySync(undefined, [request])) as HostReply;
    if (reply.ok) return reply.value;
    const error = new ErrorCtor(reply.error.message);
    ObjectDefineProperty(error, 'name', { value: reply.error.name, enumerable: false, configurable: true, writable: true });
    throw error;
  }

  type ToolHandlerFunction = (name: string, args: Record<string, unknown>) => unknown;
  type ToolSessionReply =
    | { done: true; value: unknown }
    | { done: false; session: string; requests: { id: string; name: string; arguments: Record<string, unknown> }[] };

  // The second argument of every query function: a model name, or an options object.
  function optionsObject(kind: string, options: unknown): Record<string, unknown> {
    if (options === undefined || options === null) return {};
    if (typeof options === 'string') return { model: options };
    if (typeof options !== 'object' || ArrayIsArray(options)) {
      throw new TypeErrorCtor(`${kind}: the second argument must be a model name or an options object.`);
    }
    return options as Record<string, unknown>;
  }

  function queryOptions(kind: string, options: unknown): { payload: Record<string, unknown>; handler?: ToolHandlerFunction } {
    const { model, response_format, tools, tool_choice, tool_handler: handler } = optionsObject(kind, options);
    if (tools !== undefined && tools !== null) {
      if (typeof handler !== 'function') {
        throw new TypeErrorCtor(`${kind}: tool_handler is required when tools are provided (a function (name, args) => result).`);
      }
      return { payload: { model, response_format, tools, tool_choice }, handler: handler as ToolHandlerFunction };
    }
    return { payload: { model, response_format, tool_choice } };
  }

  // With tools, the host runs the tool-calling loop and hands each round of tool calls back here,
  // because the handler is sandbox code and only sandbox code can call it.
  function queryWithTools(kind: string, payload: Record<string, unknown>, handler: ToolHandlerFunction): unknown {
    let reply = callHost(kind, payload) as ToolSessionReply;
    while (!reply.done) {
      const results: { id: string; output: string }[] = [];
      for (const request of reply.requests) {
        let output: string;
        try {
          const value = ReflectApply(handler, undefined, [request.name, request.arguments]);
          if (value !== null && typeof value === 'object' && typeof (value as { then?: unknown }).then === 'function') {
            throw new TypeErrorCtor('the tool handler returned a Promise; write it as a normal function (llm_query and tool_handler inside it are synchronous)');
          }
          output = toolOutputText(value);
        } catch (error) {
          output = toolErrorText(request.name, error);
        }
        ArrayPrototypePush(results, { id: request.id, output });
      }
      reply = callHost('tool_results', { session: reply.session, results }) as ToolSessionReply;
    }
    return reply.value;
  }

  function checkPrompt(kind: string, prompt: unknown) {
    if (typeof prompt !== 'string' && !ArrayIsArray(prompt)) {
      throw new TypeErrorCtor(`${kind}: the prompt must be a string or an array of chat messages, got ${describeType(prompt)}.`);
    }
  }

  function checkPrompts(kind: string, prompts: unknown) {
    if (!ArrayIsArray(prompts)) throw new TypeErrorCtor(`${kind}: expected an array of prompts, got ${describeType(prompts)}.`);
    for (let index = 0; index < prompts.length; index++) checkPrompt(`${kind}[${index}]`, prompts[index]);
  }

  function llm_query(prompt: unknown, options?: unknown) {
    checkPrompt('llm_query', prompt);
    const { payload, handler } = queryOptions('llm_query', options);
    if (handler) return queryWithTools('llm_query', { prompt, ...payload }, handler);
    return callHost('llm_query', { prompt, ...payload });
  }
  function llm_query_batched(prompts: unknown, options?: unknown) {
    checkPrompts('llm_query_batched', prompts);
    const { payload, handler } = queryOptions('llm_query_batched', options);
    if (handler) return queryWithTools('llm_query_batched', { prompts, ...payload }, handler);
    return callHost('llm_query_batched', { prompts, ...payload });
  }
  function rlm_query(prompt: unknown, options?: unknown) {
    checkPrompt('rlm_query', prompt);
    return callHost('rlm_query', { prompt, model: optionsObject('rlm_query', options).model });
  }
  function rlm_query_batched(prompts: unknown, options?: unknown) {
    checkPrompts('rlm_query_batched', prompts);
    return callHost('rlm_query_batched', { prompts, model: optionsObject('rlm_query_batched', options).model });
  }
  function tool_handler(name: unknown, args?: unknown) {
    if (typeof name !== 'string') throw new TypeErrorCtor(`tool_handler: the tool name must be a string, got ${describeType(name)}.`);
    const value = callHost('tool_call', { name, arguments: args ?? {} });
    return typeof value === 'string' ? value : JSONStringify(value);
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
  for (const name of ObjectGetOwnPropertyNames(scaffold)) defineScaffold(name, scaffold[name]);
  // Every rewritten block hands its promise to this hook in the same script, so a rejection is
  // handled before the microtask checkpoint (isolated-vm rethrows unhandled rejections).
  ObjectDefineProperty(globalObject, BLOCK_HOOK, {
    value: (promise: Promise<unknown>) => {
      PromisePrototypeThen(
        promise,
        (value) => {
          outcome = { state: 'fulfilled', value };
        },
        (error) => {
          outcome = { state: 'rejected', error };
        },
      );
    },
    writable: false,
    enumerable: false,
    configurable: false,
  });
  // Atomics.wait would park the isolate thread outside any timeout's reach; nothing in a
  // single-threaded sandbox needs it.
  ObjectDefineProperty(Atomics, 'wait', { value: undefined, writable: false, configurable: false });
  for (const name of ObjectGetOwnPropertyNames(globalObject)) builtinNames[name] = true;

  // Scaffold values are shared by every block: nothing inside them may be changed by model code.
  // Iterative, so deeply nested JSON cannot overflow the stack.
  function deepFreeze<T>(value: T): T {
    const pending: unknown[] = [value];
    while (pending.length > 0) {
      const item = pending.pop();
      if (item === null || typeof item !== 'object' || ObjectIsFrozen(item)) continue;
      ObjectFreeze(item);
      for (const key of ObjectGetOwnPropertyNames(item)) ArrayPrototypePush(pending, (item as Record<string, unknown>)[key]);
    }
    return value;
  }

  // ---- errors --------------------------------------------------------------------------------

  function describeError(error: unknown): { name: string; message: string; stack: string } {
    if (error instanceof ErrorCtor) {
      const name = readOwnString(error, 'name') ?? 'Error';
      const message = readOwnString(error, 'message') ?? '';
      const rawStack = readOwnString(error, 'stack');
      const header = message ? `${name}: ${message}` : name;
      return { name, message, stack: rawStack ? cleanStack(rawStack, header) : header };
    }
    const shown = inspect(error);
    return { name: 'Uncaught', message: shown, stack: `Uncaught ${shown}` };
  }

  // Only frames in model code are useful (and safe) to show: drop the prelude and isolate plumbing.
  function cleanStack(stack: string, header: string): string {
    const kept: string[] = [header];
    for (const line of StringPrototypeSplit(stack, '\n')) {
      if (!RegExpPrototypeTest(STACK_FRAME, line) || !StringPrototypeIncludes(line, `${BLOCK_FILENAME}:`)) continue;
      if (StringPrototypeIncludes(line, wrapperFrame)) continue;
      ArrayPrototypePush(kept, StringPrototypeReplace(line, BLOCK_POSITION, (_match, row: string, column: string) => {
        const original = originalColumn(NumberParseInt(row, 10), NumberParseInt(column, 10));
        return `${BLOCK_FILENAME}:${row}:${original}`;
      }));
    }
    return ArrayPrototypeJoin(kept, '\n');
  }

  // Maps a 1-based column of the rewritten block back to the column the model wrote.
  function originalColumn(row: number, column: number): number {
    let shift = 0;
    let editEnd = 0;
    for (const [line, at, lineShift] of columnShifts) {
      if (line === row && at <= column - 1) {
        shift = lineShift;
        editEnd = at;
      }
    }
    return MathMax(column - shift, editEnd - shift + 1, 1);
  }

  // ---- the controller the worker drives --------------------------------------------------------

  return ObjectFreeze({
    setGlobal(name: string, value: unknown, format: 'text' | 'json') {
      defineScaffold(name, format === 'json' ? deepFreeze(JSONParse(value as string)) : value);
    },
    // Host tools: TOOLS holds their OpenAI schemas (for llm_query's `tools` option), and
    // tools.NAME(args) calls one and returns its result as a value.
    setTools(specsJson: string) {
      const specs = JSONParse(specsJson) as { function: { name: string } }[];
      const callable: Record<string, (args?: unknown) => unknown> = ObjectCreate(null);
      for (const spec of specs) {
        const name = spec.function.name;
        callable[name] = (args?: unknown) => callHost('tool_call', { name, arguments: args ?? {} });
      }
      defineScaffold('TOOLS', deepFreeze(specs));
      defineScaffold('tools', ObjectFreeze(callable));
    },
    beginBlock(limit: number, wrapperLine: number, columnShiftsJson: string) {
      wrapperFrame = `${BLOCK_FILENAME}:${wrapperLine}:`;
      columnShifts = JSONParse(columnShiftsJson) as [number, number, number][];
      output = [];
      outputLength = 0;
      droppedChars = 0;
      outputLimit = limit;
      finalAnswer = undefined;
      blockOverrides = ObjectCreate(null);
      outcome = { state: 'pending' };
    },
    collect(showResult: boolean): string {
      let error: { name: string; message: string; stack: string } | undefined;
      if (outcome.state === 'rejected') error = describeError(outcome.error);
      else if (outcome.state === 'pending') {
        error = {
          name: 'PendingPromiseError',
          message:
            'The block ended while still awaiting a promise that nothing can settle (there are no timers or ' +
            'background tasks in the sandbox). Await only llm_query/tool results or promises your code resolves.',
          stack: '',
        };
      } else if (showResult && outcome.value !== undefined) {
        const value = outcome.value;
        write(`${typeof value === 'string' ? JSONStringify(value) : cleanInspect(value)}\n`);
      }
      blockOverrides = ObjectCreate(null);
      return JSONStringify({
        stdout: ArrayPrototypeJoin(output, ''),
        droppedChars,
        error,
        final: finalAnswer,
        variables: listVariables(),
      });
    },
  });
}
