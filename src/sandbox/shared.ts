// What the host side (src/sandbox) and the prelude inside the isolate (sandbox/) must agree on.
// The prelude bundles this file, so keep it free of Node imports and runtime dependencies.

/** Script name of model blocks in stack traces (`at f (block:3:7)`). */
export const BLOCK_FILENAME = 'block';
/** Script name of the prelude; its frames never reach the model. */
export const PRELUDE_FILENAME = 'rlm-prelude';
/** Installed by the prelude; every rewritten block hands its promise to it (see rewrite.ts). */
export const BLOCK_HOOK = '__rlm_block__';

/**
 * Bounds on what one block report may carry to the root model, whatever the block did: a thrown
 * error with a 10 MB message or a million long variable names must not become the next prompt.
 * Printed output has its own limit (outputLimitChars).
 */
export const REPORT_LIMITS = {
  errorNameChars: 100,
  errorMessageChars: 2_000,
  stackFrames: 20,
  stackLineChars: 300,
  variables: 100,
  variableNameChars: 80,
  variableTypeChars: 80,
} as const;

/**
 * A session loads its inputs as context_0, context_1, ... and earlier conversations as history_0,
 * ... These names are reserved (as scaffold accessors) when the first one is loaded, so a `var
 * context_3 = ...` in an early turn cannot take a name a later turn needs.
 */
export const SESSION_NAME_PREFIXES = ['context_', 'history_'] as const;
export const RESERVED_SESSION_NAMES = 1_000;

/** Bounds on one call from model code to the host, checked inside the isolate before it is sent. */
export interface HostCallLimits {
  /** Characters of JSON one call may carry. */
  maxChars: number;
  /** Prompts in one llm_query_batched / rlm_query_batched call. */
  maxBatchItems: number;
  /** Levels of nested arrays and objects in one call. */
  maxDepth: number;
}

/** Reply envelope sent back into the isolate for every host call. */
export type HostReply = { ok: true; value: unknown } | { ok: false; error: { name: string; message: string } };

/**
 * What `llm_query` / `llm_query_batched` with tools (and every `tool_results` call) answer: either
 * the final value, or tool calls handed back for the sandbox's handler to run, to be answered with
 * `tool_results` naming the same `handBack`.
 */
export type ToolHandBackReply =
  | { done: true; value: unknown }
  | { done: false; handBack: string; requests: { id: string; name: string; arguments: Record<string, unknown> }[] };
