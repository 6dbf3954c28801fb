import type { HostCall } from '../sandbox/protocol.js';
import type { HostCallHandler } from '../sandbox/sandbox.js';
import type { LlmQueries } from './llm-queries.js';

/**
 * Routes calls from model code to the services of a run. rlm_query without recursion behaves
 * like llm_query; tool calls need a tool handler.
 */
export function routeHostCalls(services: {
  queries: LlmQueries;
  rlmQuery?: (call: Extract<HostCall, { kind: 'rlm_query' | 'rlm_query_batched' }>, signal: AbortSignal) => Promise<unknown>;
  toolCall?: (call: Extract<HostCall, { kind: 'tool_call' }>, signal: AbortSignal) => Promise<unknown>;
}): HostCallHandler {
  return (call, { signal }) => {
    switch (call.kind) {
      case 'llm_query':
      case 'llm_query_batched':
        return services.queries.query(call, signal);
      case 'tool_results':
        return services.queries.toolResults(call);
      case 'rlm_query':
        return services.rlmQuery ? services.rlmQuery(call, signal) : services.queries.query({ kind: 'llm_query', prompt: call.prompt, model: call.model }, signal);
      case 'rlm_query_batched':
        return services.rlmQuery
          ? services.rlmQuery(call, signal)
          : services.queries.query({ kind: 'llm_query_batched', prompts: call.prompts, model: call.model }, signal);
      case 'tool_call':
        if (!services.toolCall) throw new Error('tool_handler: no tools are available in this run');
        return services.toolCall(call, signal);
    }
  };
}
