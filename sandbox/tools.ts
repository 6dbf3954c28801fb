// Host tools from model code: tool_handler(name, args) returns the result as text (the form a
// model reads), tools.NAME(args) returns it as a value. Tools the host answers asynchronously
// return promises of the same.
import type { HostCallLimits } from '../src/sandbox/shared.js';
import { toolErrorText, toolOutputText } from '../src/lm/tool-text.js';
import { errorMessage } from './error-text.js';
import type { HostCalls } from './host-calls.js';
import { describeType } from './inspect.js';
import { toJsonText } from './json.js';
import { FunctionPrototypeHasInstance, ObjectFreeze, PromiseCtor, ReflectApply, TypeErrorCtor, newRecord } from './primordials.js';

export type ToolHandlerFunction = (name: string, args: Record<string, unknown>) => unknown;
type ToolFunction = (args?: unknown) => unknown;

interface ToolsOptions {
  hostCalls: HostCalls;
  limits: HostCallLimits;
}

export type Tools = ReturnType<typeof createTools>;

export function createTools({ hostCalls, limits }: ToolsOptions) {
  // Tools the host answers asynchronously (see useTools): calling one returns a promise.
  let asyncToolNames = newRecord<true>();

  const toolText = (value: unknown) => toolOutputText(value, (data) => toJsonText(data, limits));

  function tool_handler(name: unknown, args?: unknown) {
    if (typeof name !== 'string') throw new TypeErrorCtor(`tool_handler: the tool name must be a string, got ${describeType(name)}.`);
    const payload = toolPayload(name, args);
    if (asyncToolNames[name] === true) return hostCalls.callAsync({ kind: 'tool_call', payload, label: 'tool_handler', present: toolText });
    return toolText(hostCalls.call('tool_call', payload, 'tool_handler'));
  }

  function toolFunction(name: string): ToolFunction {
    const label = `tools.${name}`;
    if (asyncToolNames[name] === true) {
      return (args?: unknown) => hostCalls.callAsync({ kind: 'tool_call', payload: toolPayload(name, args), label, present: sameValue });
    }
    return (args?: unknown) => hostCalls.call('tool_call', toolPayload(name, args), label);
  }

  /** The `tools` object for these tool names; the calls of those in `asyncNames` return promises. */
  function useTools(names: string[], asyncNames: string[]): Readonly<Record<string, ToolFunction>> {
    asyncToolNames = newRecord<true>();
    for (let index = 0; index < asyncNames.length; index++) asyncToolNames[asyncNames[index]!] = true;
    const callable = newRecord<ToolFunction>();
    for (let index = 0; index < names.length; index++) callable[names[index]!] = toolFunction(names[index]!);
    return ObjectFreeze(callable);
  }

  /** Runs llm_query's tool handler (sandbox code) for one tool call; its failures become the result text. */
  function runToolHandler(handler: ToolHandlerFunction, name: string, args: Record<string, unknown>): string {
    try {
      const value = ReflectApply(handler, undefined, [name, args]);
      if (FunctionPrototypeHasInstance(PromiseCtor, value)) {
        throw new TypeErrorCtor('the tool handler returned a Promise; write it as a normal function (llm_query and synchronous tools work inside it, asynchronous tools do not)');
      }
      return toolText(value);
    } catch (error) {
      return toolErrorText(name, errorMessage(error));
    }
  }

  return { tool_handler, useTools, runToolHandler };
}

function toolPayload(name: string, args: unknown): Record<string, unknown> {
  const payload = newRecord<unknown>();
  payload.name = name;
  payload.arguments = args ?? newRecord();
  return payload;
}

function sameValue(value: unknown): unknown {
  return value;
}
