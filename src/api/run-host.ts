import { DEFAULTS } from '../defaults.js';
import type { OutputSchemaSpec } from '../engine/output-schema.js';
import type { RLM } from '../engine/rlm.js';
import { ConfigurationError } from '../errors.js';
import type { ToolChoice, ToolSpec } from '../lm/types.js';
import { ActiveRun, type RunStep } from './active-run.js';
import { ApiError, failureAsApiError } from './errors.js';
import { PausedRuns } from './paused-runs.js';
import type { ToolResultWording } from './tool-results.js';

export interface RunHostOptions {
  /** The RLM that answers for a root and sub model (cache them: setup files load once per RLM). */
  rlmFor(models: { root: string; sub: string }): RLM;
  /**
   * Splits a request's model name into root and sub models (`root:sub`, or one name for both).
   * @default splitModelName without an upstream model list
   */
  resolveModels?(name: string, subModel: string | undefined): Promise<{ root: string; sub: string }> | { root: string; sub: string };
  /** How long a run waits for its caller's tool results. @default 600000 (10 minutes) */
  pausedRunTtlMs?: number;
  /** Paused runs kept at once; past it the oldest is stopped. @default 1000 */
  maxPausedRuns?: number;
}

/** A new run's question, as an API request put it. */
export interface RunRequest {
  model: string;
  subModel: string | undefined;
  context: unknown;
  query: string;
  output: OutputSchemaSpec | undefined;
  callerTools: { specs: ToolSpec[]; toolChoice: ToolChoice | undefined } | undefined;
}

export type ReachedStep = Exclude<RunStep, { type: 'failed' }>;

/**
 * What the chat-completions and Responses APIs share below their wire formats: starting runs for
 * a model name, the runs paused for their callers' tool results, and failures as API errors.
 */
export class RunHost {
  private readonly paused: PausedRuns;

  constructor(private readonly options: RunHostOptions) {
    this.paused = new PausedRuns({ ttlMs: options.pausedRunTtlMs ?? DEFAULTS.server.pausedRunTtlMs, max: options.maxPausedRuns ?? DEFAULTS.server.maxPausedRuns });
  }

  /** Runs waiting for tool results from their callers. */
  get pausedRuns(): number {
    return this.paused.size;
  }

  async start(request: RunRequest): Promise<ActiveRun> {
    const models = await (this.options.resolveModels ?? splitModelName)(request.model, request.subModel);
    const { context, query, output, callerTools } = request;
    return new ActiveRun(this.rlmFor(models), { context, query, output, callerTools });
  }

  /** The paused run these tool results (by call id) belong to, resumed with them. */
  resume(results: Map<string, string>, wording: ToolResultWording): ActiveRun {
    const run = this.paused.take([...results.keys()], wording);
    run.deliver(results, wording);
    return run;
  }

  /**
   * Waits for the run's next step; a hand-back keeps the run for a later request, a failure
   * becomes an API error (naming `formatParam` when no answer matched the requested format).
   */
  async nextStep(run: ActiveRun, signal: AbortSignal | undefined, formatParam: string): Promise<ReachedStep> {
    const step = await run.next(signal);
    if (step.type === 'failed') throw failureAsApiError(step.error, formatParam);
    if (step.type === 'tool-calls') this.paused.keep(run);
    return step;
  }

  /** Stops every paused run (the server is shutting down). */
  close(reason: unknown = new Error('the server is shutting down')): void {
    this.paused.closeAll(reason);
  }

  /** A model pair the server cannot run (no price under a budget, ...) is the request's problem: 400. */
  private rlmFor(models: { root: string; sub: string }): RLM {
    try {
      return this.options.rlmFor(models);
    } catch (error) {
      if (error instanceof ConfigurationError) throw new ApiError(400, 'invalid_request_error', error.message, 'model', error.code);
      throw error;
    }
  }
}

/**
 * `root:sub` names two models; a plain name is used for both. Names that contain `:` themselves
 * (Ollama's `qwen2.5:7b`) are never split when `listed` (the upstream's model list) has them
 * whole, and are split only where both halves are listed when a list is known. An empty list
 * (an upstream that lists nothing, or did not answer) knows no names: the name is split at its
 * first `:`. `subModel` (the `rlm_sub_model` extension field) always wins.
 */
export function splitModelName(name: string, subModel?: string, listedNames?: ReadonlySet<string>): { root: string; sub: string } {
  const listed = listedNames && listedNames.size > 0 ? listedNames : undefined;
  const whole = { root: name, sub: subModel ?? name };
  if (subModel || !name.includes(':') || listed?.has(name)) return whole;
  for (let at = name.indexOf(':'); at !== -1; at = name.indexOf(':', at + 1)) {
    const [root, sub] = [name.slice(0, at), name.slice(at + 1)];
    if (!listed || (listed.has(root) && listed.has(sub))) return { root, sub };
  }
  return whole;
}
