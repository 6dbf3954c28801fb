// The types the parts of a run share. Kept apart from run.ts so the parts (child runs, block
// services, the run's sandbox) can name them without importing the run loop.
import type { DistributiveOmit } from '../distributive-omit.js';
import type { KeyedQueues } from '../lm/scheduler.js';
import type { ChatMessage, ChatRequest, ChatResponse, ToolCall } from '../lm/types.js';
import type { Sandbox, SandboxOptions } from '../sandbox/sandbox.js';
import type { ToolRegistry } from '../tools/registry.js';
import type { CallerTools } from './caller-tools.js';
import type { IterationRecord, RlmEvent } from './events.js';
import type { BlockScope } from './host-calls.js';
import type { TreeBudget } from './limits.js';
import type { OutputSchema } from './output-schema.js';
import type { TrajectoryLogger } from './trajectory.js';

/** Settings every run of a tree shares (resolved from the RLM options). */
export interface RunSettings {
  rootModel: string;
  subModel: string;
  maxIterations: number;
  maxDepth: number;
  maxErrors: number | undefined;
  maxToolIterations: number;
  maxConcurrentChildren: number;
  systemPrompt: string | undefined;
  sandbox: Omit<SandboxOptions, 'onHostCall' | 'onBlockWaiting'>;
  setupCode: string[];
  /** Host tools for model code (shared by child runs). */
  tools: ToolRegistry;
  /** What went wrong while preparing, without stopping runs (an MCP server that did not start). */
  warnings: string[];
  /** Tokens the root model of each run can read; undefined: from the table of known models. */
  contextWindow: number | undefined;
  /** When to compact a root conversation, as a share of the window; false: never (the run ends instead). */
  compaction: { thresholdPct: number } | false;
}

/** What every run of one tree shares: settings, limits, the event sink and the child queues. */
export interface TreeShared {
  settings: RunSettings;
  budget: TreeBudget;
  emit: (event: RlmEvent) => void;
  onRequest: ((request: Omit<ChatRequest, 'signal'>, response: ChatResponse | undefined) => void) | undefined;
  /** Child runs waiting or running, per depth, so a parent waiting on its children never holds a slot they need. */
  childQueues: KeyedQueues<number>;
}

export interface RunInput {
  context: unknown;
  query: string | undefined;
  /** The schema of the final answer (the root run of a completion given `output`). */
  output?: OutputSchema | undefined;
}

export interface RunOutcome {
  response: string;
  /** With an output schema: the answer's value (`response` is its JSON). */
  output?: unknown;
  forced: boolean;
  iterations: number;
  trajectory: IterationRecord[];
  /** The root model's conversation, for sessions (history_N). */
  messages: ChatMessage[];
}

/** Session state a multi-turn conversation keeps between completions. */
export interface SessionState {
  sandbox: Sandbox<BlockScope> | undefined;
  /** Contexts loaded so far: the next one is context_N. */
  contexts: number;
  /** Conversations loaded so far: the next one is history_N. */
  histories: number;
  /** The root conversation of the last completion, loaded as history_N by the next one. */
  lastMessages?: ChatMessage[] | undefined;
}

/** Where a run sits: its parent (for a child run), its session, and who watches its iterations. */
export interface RunPlacement {
  parentRunId?: string;
  logger?: TrajectoryLogger | undefined;
  onIteration?: ((iteration: IterationRecord, index: number) => unknown) | undefined;
  session?: SessionState;
  /** For a child run: the parent block's signal, so the child stops when that block does. */
  parentSignal?: AbortSignal;
  /** Tools of the caller, handed back for it to run (the root run of a request to `rlm serve`). */
  callerTools?: CallerTools | undefined;
}

/** An event as a run reports it; the run adds its id and depth. */
export type RunEventInput = DistributiveOmit<RlmEvent, 'runId' | 'depth'>;

/** How one root-model turn ended: the run loop switches on `type`. */
export type TurnOutcome =
  | { type: 'final'; reply: string; answer: string; output?: unknown; source: 'code' | 'text'; record: IterationRecord }
  | { type: 'continue'; reply: string; record: IterationRecord; outputs: ChatMessage[]; notes: string[]; codeFailed: boolean }
  | { type: 'caller-tools'; reply: string; record: IterationRecord; calls: ToolCall[]; asked: ChatMessage[] };
