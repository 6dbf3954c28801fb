import { z } from 'zod';
import { DEFAULTS } from '../defaults.js';
import type { RejectedFinal } from './schema-problems.js';
import type { HostCallLimits } from './shared.js';

// ---- host <-> worker process ------------------------------------------------------------------
// A worker process hosts the isolates of many runs. Every command and event but `ready` names the
// run's isolate by its `sandbox` id, which the host gives out; the worker never lets one run's
// command reach another's isolate. A `payload` travels as raw text beside the frame's JSON header
// (see framing.ts).

type RunCommand =
  | {
      /** Creates the run's isolate (fresh, with its own heap limit) and installs the prelude in it. */
      type: 'init';
      id: number;
      memoryLimitMb: number;
      hostCallLimits: HostCallLimits;
    }
  | {
      type: 'setGlobal';
      id: number;
      name: string;
      format: 'text' | 'json';
      path: string;
      encoding: 'latin1' | 'utf8';
      /** Loading runs prelude code in the isolate: like a block, it must not run forever. */
      timeoutMs: number;
    }
  | {
      type: 'setTools';
      id: number;
      specs: string;
      /** Tools whose calls return a promise in the sandbox (sent as `hostCallAsync`). */
      asyncTools: string[];
      timeoutMs: number;
    }
  | {
      /**
       * The JSON Schema that FINAL values of blocks run with `checkFinal` must match (null: none),
       * and the refusal they throw, with `{{problems}}` for the list (see Sandbox.setOutputSchema).
       */
      type: 'setOutputSchema';
      id: number;
      schema: string | null;
      refusal: string;
    }
  | {
      type: 'execute';
      id: number;
      code: string;
      hasResult: boolean;
      /** Line of the rewritten block's wrapper call: a frame there is plumbing, not model code. */
      wrapperLine: number;
      /** How the rewrite moved columns (see RewrittenBlock.columnShifts); stack frames map back. */
      columnShifts: [number, number, number][];
      timeoutMs: number;
      outputLimit: number;
      /** FINAL and FINAL_VAR have their value checked against the output schema before taking it (see Sandbox.execute). */
      checkFinal: boolean;
    }
  | {
      /** Answers a `hostCall` or a `hostCallAsync`. */
      type: 'hostReply';
      id: number;
      /** The HostReply as JSON text, parsed once, inside the isolate. */
      payload: string;
    }
  | {
      /** Ends the run's isolate, also mid-block; answered `done` once it is gone. */
      type: 'dispose';
      id: number;
    };

export type WorkerCommand = RunCommand & { sandbox: number };

type RunEvent =
  | { type: 'done'; id: number }
  | { type: 'failed'; id: number; message: string; disposed: boolean }
  | {
      type: 'executed';
      id: number;
      /**
       * `memory-full`: the block ended, but left the heap nearly full (see RunIsolate.heapLeftFull).
       * `report-timeout` / `report-failed`: the block ended, but its report (error, trailing value,
       * variables) ran out of time or failed in model code the block left behind; `result` then
       * holds only its output and final answer.
       */
      outcome: 'completed' | 'timeout' | 'memory' | 'memory-full' | 'compile-error' | 'unhandled-rejection' | 'report-timeout' | 'report-failed';
      failure?: string | undefined;
      result?: string | undefined;
      /** FINAL values of the block the output schema refused (the first few). */
      rejectedFinals?: RejectedFinal[];
    }
  | {
      type: 'hostCall';
      id: number;
      /** The call as model code sent it: JSON text the host parses once and validates. */
      payload: string;
    }
  | {
      /** A call model code awaits rather than waits for: the block goes on until it awaits. */
      type: 'hostCallAsync';
      id: number;
      payload: string;
    }
  | {
      /**
       * The block cannot go on until one of these `hostCallAsync` calls is answered; the run sends
       * nothing more until then. Sent again each time the block is stuck anew.
       */
      type: 'waiting';
      calls: number[];
    };

/** `ready`: the process has loaded isolated-vm and takes commands. */
export type WorkerEvent = { type: 'ready' } | (RunEvent & { sandbox: number });

/**
 * Reads a payload the isolate wrote as JSON text. Model code shapes it, so text that does not parse
 * reads as undefined, which every schema below refuses.
 */
export function parseJsonText(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

// ---- what the prelude reports about a block (untrusted: produced inside the isolate) -----------

export const blockReportSchema = z.object({
  stdout: z.string(),
  droppedChars: z.number().int().nonnegative(),
  error: z.object({ name: z.string(), message: z.string(), stack: z.string() }).optional(),
  final: z.string().optional(),
  /** Said after the output: calls the block started but never awaited. */
  note: z.string().optional(),
  variables: z.array(z.object({ name: z.string(), type: z.string() })),
  /** Variables defined but not listed (the list is bounded). */
  omittedVariables: z.number().int().nonnegative(),
});
export type BlockReport = z.infer<typeof blockReportSchema>;

// ---- calls from model code to the host (untrusted) ---------------------------------------------

const chatMessageSchema = z
  .object({
    role: z.enum(['system', 'user', 'assistant', 'tool', 'developer']),
    content: z.union([z.string(), z.null(), z.array(z.unknown())]).optional(),
  })
  .passthrough();

const promptSchema = z.union([
  z.string(),
  z.array(chatMessageSchema).min(1, 'a message list needs at least one message'),
]);

// The prelude refuses larger batches before sending; this is the host's own check of the same bound.
const promptsSchema = z.array(promptSchema).max(DEFAULTS.sandbox.maxBatchItems);

const toolSpecSchema = z.object({
  type: z.literal('function'),
  function: z.object({
    name: z.string().min(1),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
    strict: z.boolean().optional(),
  }),
});

const toolChoiceSchema = z.union([
  z.enum(['auto', 'none', 'required']),
  z.object({ type: z.literal('function'), function: z.object({ name: z.string().min(1) }) }),
]);

/**
 * Larger schemas are refused: the host builds a validator from the schema model code sends, and
 * that work must stay small next to the model call it checks.
 */
export const MAX_QUERY_SCHEMA_CHARS = 64 * 1024;

const querySchemaSchema = z
  .record(z.string(), z.unknown())
  .refine((schema) => JSON.stringify(schema).length <= MAX_QUERY_SCHEMA_CHARS, `the schema is larger than ${MAX_QUERY_SCHEMA_CHARS / 1024} KB of JSON; send a smaller one`);

const queryOptionsShape = {
  model: z.string().min(1).optional(),
  response_format: z.record(z.string(), z.unknown()).optional(),
  /** A JSON Schema the answer must match: the call then answers the parsed, validated value. */
  schema: querySchemaSchema.optional(),
  /** Tools for the sub-model; their calls are handed back to the sandbox's tool_handler. */
  tools: z.array(toolSpecSchema).min(1).optional(),
  tool_choice: toolChoiceSchema.optional(),
};

export const hostCallSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('llm_query'), prompt: promptSchema, ...queryOptionsShape }),
  z.object({ kind: z.literal('llm_query_batched'), prompts: promptsSchema, ...queryOptionsShape }),
  z.object({ kind: z.literal('rlm_query'), prompt: promptSchema, model: z.string().min(1).optional() }),
  z.object({ kind: z.literal('rlm_query_batched'), prompts: promptsSchema, model: z.string().min(1).optional() }),
  z.object({
    kind: z.literal('tool_call'),
    name: z.string().min(1),
    arguments: z.record(z.string(), z.unknown()),
  }),
  z.object({
    kind: z.literal('tool_results'),
    handBack: z.string(),
    results: z.array(z.object({ id: z.string(), output: z.string() })),
  }),
]);

/**
 * A validated call from sandbox code: `llm_query`, `llm_query_batched`, `rlm_query`,
 * `rlm_query_batched`, `tool_call` (`tools.NAME(args)`, `tool_handler(NAME, args)`),
 * or `tool_results` (the outputs of a sub-model's tool calls that an llm_query with tools handed back).
 */
export type HostCall = z.infer<typeof hostCallSchema>;
export type HostCallKind = HostCall['kind'];

export type { HostReply, ToolHandBackReply } from './shared.js';
