import { DEFAULTS } from '../defaults.js';
import { ConfigurationError } from '../errors.js';
import { ApiError } from './errors.js';
import type { RLM } from '../engine/rlm.js';
import { ActiveRun, type RunStep } from './active-run.js';
import { PausedRuns } from './paused-runs.js';
import { callerToolsOf, outputOf, parseRequest, questionAndContext, trailingToolResults, type ChatCompletionRequest, type ParsedRequest } from './request.js';
import { chunk, chunksOf, completionId, completionOf, failureAsApiError, type ChatCompletion, type ChatCompletionChunk } from './responses.js';

export interface ChatCompletionsOptions {
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

/**
 * RLM as a model behind OpenAI's chat-completions API, without HTTP: `create()` takes the body of a
 * chat completion request and answers what the OpenAI API would. The last user message is the
 * question; the system messages and earlier turns (or the `rlm_context` extension field) are the
 * context the run explores. Tools in the request belong to the caller: when the root model or
 * code in the REPL calls one, the response carries the tool calls (`finish_reason: "tool_calls"`)
 * and the run waits; the request that brings the tool results resumes it.
 *
 * @example
 * const api = new ChatCompletions({ rlmFor: ({ root, sub }) => new RLM({ model: root, subModel: sub }) });
 * const completion = await api.create({ model: 'gpt-5-mini', messages: [{ role: 'system', content: hugeText }, { role: 'user', content: 'Who signed?' }] });
 */
export class ChatCompletions {
  private readonly paused: PausedRuns;

  constructor(private readonly options: ChatCompletionsOptions) {
    this.paused = new PausedRuns({ ttlMs: options.pausedRunTtlMs ?? DEFAULTS.server.pausedRunTtlMs, max: options.maxPausedRuns ?? DEFAULTS.server.maxPausedRuns });
  }

  /** Runs waiting for tool results from their callers. */
  get pausedRuns(): number {
    return this.paused.size;
  }

  create(body: ChatCompletionRequest & { stream?: false | null }, options?: { signal?: AbortSignal }): Promise<ChatCompletion>;
  create(body: ChatCompletionRequest & { stream: true }, options?: { signal?: AbortSignal }): Promise<AsyncIterable<ChatCompletionChunk>>;
  create(body: ChatCompletionRequest, options?: { signal?: AbortSignal }): Promise<ChatCompletion | AsyncIterable<ChatCompletionChunk>>;
  async create(body: ChatCompletionRequest, options: { signal?: AbortSignal } = {}): Promise<ChatCompletion | AsyncIterable<ChatCompletionChunk>> {
    const request = parseRequest(body);
    const run = await this.runFor(request);
    if (request.stream) return this.stream(request, run, options.signal);
    const step = await this.nextStep(run, options.signal);
    return completionOf(step, request.model, run.takeUsage());
  }

  /** Stops every paused run (the server is shutting down). */
  close(reason: unknown = new Error('the server is shutting down')): void {
    this.paused.closeAll(reason);
  }

  /** The paused run the request's tool results belong to, or a new run for its question. */
  private async runFor(request: ParsedRequest): Promise<ActiveRun> {
    const results = trailingToolResults(request.messages);
    if (results.size > 0) {
      const run = this.paused.take([...results.keys()]);
      run.deliver(results);
      return run;
    }
    const { query, context } = questionAndContext(request);
    const output = outputOf(request);
    const models = await (this.options.resolveModels ?? splitModelName)(request.model, request.rlm_sub_model);
    return new ActiveRun(this.rlmFor(models), { context, query, output, callerTools: callerToolsOf(request) });
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

  /** Waits for the run's next step; a hand-back keeps the run for the next request, a failure becomes an API error. */
  private async nextStep(run: ActiveRun, signal: AbortSignal | undefined): Promise<Exclude<RunStep, { type: 'failed' }>> {
    const step = await run.next(signal);
    if (step.type === 'failed') throw failureAsApiError(step.error);
    if (step.type === 'tool-calls') this.paused.keep(run);
    return step;
  }

  private async *stream(request: ParsedRequest, run: ActiveRun, signal: AbortSignal | undefined): AsyncGenerator<ChatCompletionChunk> {
    const id = completionId();
    let finished = false;
    try {
      yield chunk(id, request.model, { role: 'assistant', content: '' });
      const step = await this.nextStep(run, signal);
      const spent = run.takeUsage();
      yield* chunksOf(id, step, request.model, spent);
      if (request.stream_options?.include_usage) yield chunk(id, request.model, {}, null, spent.usage);
      finished = true;
    } finally {
      // A client that stops reading before the end cancels the run: nobody would see its answer.
      if (!finished) run.cancel(new Error('the client went away'));
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
