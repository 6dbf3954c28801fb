import { ToolError } from '../errors.js';
import type { HostCall } from '../sandbox/protocol.js';
import type { SubcallRecord, ToolCallRecord } from './events.js';
import type { CallerToolBatch } from './caller-tools.js';
import type { LlmQueries } from './llm-queries.js';

/**
 * What the host calls of one code block share: their llm_query state (tool-calling loops that
 * span several calls) and where their records go. One per block, so a sub-call that finishes late
 * is still recorded on the block that made it.
 */
export interface BlockScope {
  queries: LlmQueries;
  subcalls: SubcallRecord[];
  toolCalls: ToolCallRecord[];
  /** Calls to the caller's tools, sent together when the block waits for them. */
  callerBatch?: CallerToolBatch;
  /**
   * The services of the run the block belongs to. They travel with the scope because a session's
   * sandbox outlives the run that started it: a later completion's calls must reach its own run.
   */
  services: HostServices;
  /** Aborts when the block's run must stop: the caller's tools its code handed back wait on it. */
  runSignal: AbortSignal;
}

/** `rlm_query` / `rlm_query_batched`: prompts for child runs. */
export type ChildCall = Extract<HostCall, { kind: 'rlm_query' | 'rlm_query_batched' }>;
/** `tools.NAME(args)` / `tool_handler(NAME, args)`: a call to a host or caller tool. */
export type ToolHostCall = Extract<HostCall, { kind: 'tool_call' }>;

export interface HostServices {
  /** Child runs; without it (at the depth limit) rlm_query behaves like llm_query. */
  runChildren?: (call: ChildCall, signal: AbortSignal, scope: BlockScope) => Promise<unknown>;
  /** Host tools; without it tool_handler reports that the run has none. */
  callTool?: (call: ToolHostCall, signal: AbortSignal, scope: BlockScope) => Promise<unknown>;
}

/** Routes one call from model code to the service of its block's run that answers it. */
export function routeHostCall({ call, signal, scope }: { call: HostCall; signal: AbortSignal; scope: BlockScope }): unknown {
  const { services } = scope;
  switch (call.kind) {
    case 'llm_query':
    case 'llm_query_batched':
      return scope.queries.query(call, signal);
    case 'tool_results':
      return scope.queries.toolResults(call);
    case 'rlm_query':
      return services.runChildren ? services.runChildren(call, signal, scope) : scope.queries.query({ kind: 'llm_query', prompt: call.prompt, model: call.model }, signal);
    case 'rlm_query_batched':
      return services.runChildren
        ? services.runChildren(call, signal, scope)
        : scope.queries.query({ kind: 'llm_query_batched', prompts: call.prompts, model: call.model }, signal);
    case 'tool_call':
      if (!services.callTool) throw new ToolError('tool_handler: no tools are available in this run');
      return services.callTool(call, signal, scope);
  }
}
