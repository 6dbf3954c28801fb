// What the host side (src/sandbox) and the prelude inside the isolate (sandbox/) must agree on.
// The prelude bundles this file, so keep it free of Node imports and runtime dependencies.

/** Script name of model blocks in stack traces (`at f (block:3:7)`). */
export const BLOCK_FILENAME = 'block';
/** Script name of the prelude; its frames never reach the model. */
export const PRELUDE_FILENAME = 'rlm-prelude';
/** Worker process argument: it hosts one run only (`isolation: 'process'`). */
export const ONE_RUN_FLAG = '--one-run';
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

// Captured when this file loads, which inside the isolate is before any model code runs (the
// prelude bundles this file): model code replacing String.prototype.slice cannot change clip.
const sliceText = Function.prototype.call.bind(String.prototype.slice) as (text: string, start: number, end: number) => string;

/** Cuts text to `max` characters, saying how much was cut. Looks nothing up at call time. */
export function clip(text: string, max: number): string {
  return text.length <= max ? text : `${sliceText(text, 0, max)}... (${text.length - max} more chars)`;
}

/**
 * The controller the prelude's `install` returns and the worker drives, one isolated-vm reference
 * per method. Both sides are written against this type, so renaming or changing a method on one
 * side fails to compile on the other.
 */
export interface PreludeController {
  /** Defines a scaffold global (a context, a history): `json` values are parsed and frozen. */
  setGlobal(name: string, value: unknown, format: 'text' | 'json'): void;
  /** TOOLS (the tools' OpenAI schemas) and tools.NAME(args); the asynchronous ones return promises. */
  setTools(specsJson: string, asyncNamesJson: string): void;
  /**
   * Starts a block's state afresh: `columnShiftsJson` is the rewrite's column edits (see rewrite.ts);
   * with `checkFinal`, FINAL and FINAL_VAR have the worker check their value (`check_final`).
   */
  beginBlock(outputLimit: number, wrapperLine: number, columnShiftsJson: string, checkFinal: boolean): void;
  /** Whether the running block's promise has yet to settle. */
  blockPending(): boolean;
  /** Delivers the reply to an asynchronous call of the running block. */
  settleAsync(id: number, replyJson: string): void;
  /** The block report as JSON; may run model code (getters, Proxy traps), so it runs under a time limit. */
  collect(showResult: boolean): string;
  /** The report of what the prelude holds as plain strings, for when `collect` fails. */
  outputReport(): string;
  collectGarbage(): void;
}
