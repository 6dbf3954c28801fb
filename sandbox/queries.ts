// llm_query, llm_query_batched, rlm_query and rlm_query_batched: checked here, answered by the host.
// With tools, the host runs the tool-calling loop and hands each round of tool calls back here,
// because the handler is sandbox code and only sandbox code can call it.
import type { HostCallLimits, ToolHandBackReply } from '../src/sandbox/shared.js';
import type { HostCalls } from './host-calls.js';
import { describeType } from './inspect.js';
import { ArrayIsArray, ArrayPrototypePush, RangeErrorCtor, TypeErrorCtor, newList, newRecord, readOwn } from './primordials.js';
import type { ToolHandlerFunction } from './tools.js';

interface QueriesOptions {
  hostCalls: HostCalls;
  limits: HostCallLimits;
  runToolHandler: (handler: ToolHandlerFunction, name: string, args: Record<string, unknown>) => string;
}

/** The payload field each query function sends its input in. */
const QUERY_INPUTS = { llm_query: 'prompt', llm_query_batched: 'prompts', rlm_query: 'prompt', rlm_query_batched: 'prompts' } as const;
type QueryKind = keyof typeof QUERY_INPUTS;

type HandBackRequests = Extract<ToolHandBackReply, { done: false }>['requests'];

export function createQueries({ hostCalls, limits, runToolHandler }: QueriesOptions) {
  function queryWithTools(kind: string, payload: Record<string, unknown>, handler: ToolHandlerFunction): unknown {
    let reply = hostCalls.call(kind, payload) as object;
    while (readOwn(reply, 'done') !== true) {
      const results = newList<Record<string, unknown>>();
      const requests = readOwn(reply, 'requests') as HandBackRequests;
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
      reply = hostCalls.call('tool_results', next) as object;
    }
    return readOwn(reply, 'value');
  }

  /** Checks the prompt (or prompts) and asks the host; llm_query with tools runs the tool loop. */
  function query(kind: QueryKind, input: unknown, options: unknown): unknown {
    const key = QUERY_INPUTS[kind];
    if (key === 'prompt') checkPrompt(kind, input);
    else checkPrompts(kind, input);
    if (kind === 'rlm_query' || kind === 'rlm_query_batched') {
      const payload = newRecord<unknown>();
      payload[key] = input;
      payload.model = modelOption(kind, options);
      return hostCalls.call(kind, payload);
    }
    const { payload, handler } = queryOptions(kind, options);
    payload[key] = input;
    return handler ? queryWithTools(kind, payload, handler) : hostCalls.call(kind, payload);
  }

  function checkPrompts(kind: string, prompts: unknown) {
    if (!ArrayIsArray(prompts)) throw new TypeErrorCtor(`${kind}: expected an array of prompts, got ${describeType(prompts)}.`);
    if (prompts.length > limits.maxBatchItems) {
      throw new RangeErrorCtor(`${kind}: at most ${limits.maxBatchItems} prompts fit in one call, got ${prompts.length}. Split the batch into several calls.`);
    }
    for (let index = 0; index < prompts.length; index++) checkPrompt(`${kind}[${index}]`, prompts[index]);
  }

  const llm_query = (prompt: unknown, options?: unknown) => query('llm_query', prompt, options);
  const llm_query_batched = (prompts: unknown, options?: unknown) => query('llm_query_batched', prompts, options);
  const rlm_query = (prompt: unknown, options?: unknown) => query('rlm_query', prompt, options);
  const rlm_query_batched = (prompts: unknown, options?: unknown) => query('rlm_query_batched', prompts, options);
  return { llm_query, llm_query_batched, rlm_query, rlm_query_batched };
}

function checkPrompt(kind: string, prompt: unknown) {
  if (typeof prompt !== 'string' && !ArrayIsArray(prompt)) {
    throw new TypeErrorCtor(`${kind}: the prompt must be a string or an array of chat messages, got ${describeType(prompt)}.`);
  }
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
  payload.schema = schemaOption(kind, object);
  const tools = readOwn(object, 'tools');
  if (tools === undefined || tools === null) return { payload, handler: undefined };
  if (payload.schema !== undefined) throw new TypeErrorCtor(`${kind}: schema and tools cannot be combined; ask with tools first, then for the structured value.`);
  const handler = readOwn(object, 'tool_handler');
  if (typeof handler !== 'function') {
    throw new TypeErrorCtor(`${kind}: tool_handler is required when tools are provided (a function (name, args) => result).`);
  }
  payload.tools = tools;
  return { payload, handler: handler as ToolHandlerFunction };
}

// A schema asks for a parsed, validated value; it replaces response_format, which asks for text.
function schemaOption(kind: string, object: object): unknown {
  const schema = readOwn(object, 'schema');
  if (schema === undefined || schema === null) return undefined;
  if (typeof schema !== 'object' || ArrayIsArray(schema)) {
    throw new TypeErrorCtor(`${kind}: schema must be a JSON Schema object, got ${describeType(schema)}.`);
  }
  if (readOwn(object, 'response_format') !== undefined) throw new TypeErrorCtor(`${kind}: give either schema or response_format, not both.`);
  return schema;
}
