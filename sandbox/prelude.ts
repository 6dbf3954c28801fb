// The prelude runs inside every sandbox isolate before any model code. It installs the scaffold
// globals (print, console, FINAL, FINAL_VAR, SHOW_VARS, llm_query, ...) and the controller the
// worker process uses to run blocks. The two host references it receives (calls that wait for
// their reply, calls that return a promise) stay in closures: no global, property or stack frame
// reachable from model code ever holds them.
//
// Model code runs in the same realm and may pollute every built-in. The prelude and the modules
// beside it therefore use only the captured primordials and the helpers beside them (null-prototype
// lists, records and descriptors, own-property reads, a JSON writer that ignores toJSON), never
// iterate or use `instanceof` on model-reachable objects, and bound everything they report. What
// each part needs from the install (the host references, the limits, the running block) it gets
// as an argument of its factory, never from a global.
//
// The parts: block-state.ts (one object per block, replaced by beginBlock), output.ts (print,
// console), answers.ts (FINAL, FINAL_VAR), globals.ts (scaffold accessors, the model's variables),
// host-calls.ts (calls that wait, calls that return promises), queries.ts (llm_query, rlm_query),
// tools.ts (tool_handler, tools.NAME), error-text.ts (stacks and error text), block-report.ts.
import { BLOCK_HOOK, type HostCallLimits, type PreludeController } from '../src/sandbox/shared.js';
import { createAnswers } from './answers.js';
import { collectReport, outputReport } from './block-report.js';
import { appendOutput, idleBlockState, newBlockState, type BlockState, type ColumnShift } from './block-state.js';
import { createGlobals, deepFreeze, variablesText, type Globals } from './globals.js';
import { createHostCalls, type AsyncHostReference, type HostCalls, type HostReference } from './host-calls.js';
import { createOutput } from './output.js';
import { createQueries } from './queries.js';
import { createTools, type Tools } from './tools.js';
import {
  ArrayPrototypePush,
  JSONParse,
  ObjectDefineProperty,
  ObjectFreeze,
  ObjectGetOwnPropertyNames,
  PromisePrototypeThen,
  dataDescriptor,
  globalObject,
  newList,
} from './primordials.js';

const FROZEN = { writable: false, enumerable: false, configurable: false } as const;

export function install(host: HostReference, hostAsync: AsyncHostReference, limitsJson: string): PreludeController {
  'use strict';
  const limits = JSONParse(limitsJson) as HostCallLimits;
  let block = idleBlockState();
  const currentBlock = () => block;
  const globals = createGlobals(currentBlock);
  const hostCalls = createHostCalls({ host, hostAsync, limits, currentBlock });
  const tools = createTools({ hostCalls, limits });
  defineScaffold({ currentBlock, globals, hostCalls, tools, limits });
  // Every rewritten block hands its promise to this hook in the same script, so a rejection is
  // handled before the microtask checkpoint (isolated-vm rethrows unhandled rejections).
  ObjectDefineProperty(globalObject, BLOCK_HOOK, dataDescriptor(blockWatcher(currentBlock), FROZEN));
  const collectGarbage = lockDownGlobals();
  globals.markBuiltins();

  const controller: PreludeController = {
    setGlobal(name, value, format) {
      globals.defineScaffold(name, format === 'json' ? deepFreeze(JSONParse(value as string)) : value);
    },
    setTools(specsJson, asyncNamesJson) {
      const specs = JSONParse(specsJson) as { function: { name: string } }[];
      const names = newList<string>();
      for (let index = 0; index < specs.length; index++) ArrayPrototypePush(names, specs[index]!.function.name);
      const callable = tools.useTools(names, JSONParse(asyncNamesJson) as string[]);
      globals.defineScaffold('TOOLS', deepFreeze(specs));
      globals.defineScaffold('tools', callable);
    },
    beginBlock(outputLimit, wrapperLine, columnShiftsJson, checkFinal) {
      block = newBlockState(outputLimit, { wrapperLine, columnShifts: JSONParse(columnShiftsJson) as ColumnShift[] }, checkFinal === true);
    },
    blockPending: () => block.outcome.state === 'pending',
    // The worker calls this when the block has awaited; the isolate's microtasks run right after,
    // so the block goes on.
    settleAsync: (id, replyJson) => hostCalls.settle(id, replyJson),
    collect: (showResult) => collectReport(block, { showResult, globals }),
    outputReport: () => outputReport(block),
    collectGarbage: () => collectGarbage?.(),
  };
  return ObjectFreeze(controller);
}

interface ScaffoldParts {
  currentBlock: () => BlockState;
  globals: Globals;
  hostCalls: HostCalls;
  tools: Tools;
  limits: HostCallLimits;
}

/** Defines print, console, FINAL, FINAL_VAR, SHOW_VARS, the query functions, tool_handler and context. */
function defineScaffold({ currentBlock, globals, hostCalls, tools, limits }: ScaffoldParts) {
  const queries = createQueries({ hostCalls, limits, runToolHandler: tools.runToolHandler });
  const { print, console } = createOutput(currentBlock);
  const { FINAL, FINAL_VAR } = createAnswers({ currentBlock, globals, limits, hostCalls });
  function SHOW_VARS() {
    appendOutput(currentBlock(), variablesText(globals.listVariables()));
  }
  const scaffold: Record<string, unknown> = {
    print,
    console,
    FINAL,
    FINAL_VAR,
    SHOW_VARS,
    llm_query: queries.llm_query,
    llm_query_batched: queries.llm_query_batched,
    rlm_query: queries.rlm_query,
    rlm_query_batched: queries.rlm_query_batched,
    tool_handler: tools.tool_handler,
    context: undefined,
  };
  const names = ObjectGetOwnPropertyNames(scaffold);
  for (let index = 0; index < names.length; index++) globals.defineScaffold(names[index]!, scaffold[names[index]!]);
}

/** The hook a block hands its promise to. The outcome belongs to the block running then, however late its promise settles. */
function blockWatcher(currentBlock: () => BlockState): (promise: Promise<unknown>) => void {
  return function watchBlock(promise) {
    const watched = currentBlock();
    // `then` would take a species constructor from promise.constructor, which model code can reach
    // through Promise.prototype; an own undefined `constructor` makes it use the built-in Promise.
    ObjectDefineProperty(promise, 'constructor', dataDescriptor(undefined, FROZEN));
    PromisePrototypeThen(
      promise,
      (value) => {
        watched.outcome = { state: 'fulfilled', value };
      },
      (error) => {
        watched.outcome = { state: 'rejected', error };
      },
    );
  };
}

/**
 * Removes what model code must not have, and returns the garbage collector (exposed by the
 * worker's --expose-gc), which is the prelude's: the worker runs it after a block that left the
 * heap nearly full.
 */
function lockDownGlobals(): (() => void) | undefined {
  // Atomics.wait would park the isolate thread outside any timeout's reach; nothing in a
  // single-threaded sandbox needs it.
  ObjectDefineProperty(Atomics, 'wait', dataDescriptor(undefined, FROZEN));
  // V8 makes gc non-configurable, so it is emptied rather than deleted.
  const collectGarbage = (globalObject as { gc?: () => void }).gc;
  (globalObject as { gc?: unknown }).gc = undefined;
  // WebAssembly memories live outside the isolate's heap limit (two of them took a worker far past
  // a 64 MB limit), and nothing model code does needs them.
  delete (globalObject as { WebAssembly?: unknown }).WebAssembly;
  return collectGarbage;
}
