import { DEFAULTS } from '../defaults.js';
import type { ActiveRun } from './active-run.js';
import { ApiError } from './errors.js';
import { KeptResponses } from './kept-responses.js';
import { LiveResponse } from './live-response.js';
import type { ResponseEcho, ResponseEvent, ResponseObject } from './response-objects.js';
import {
  parseResponseRequest,
  responseCallerTools,
  responseOutput,
  responseQuestionAndContext,
  trailingFunctionOutputs,
  type ParsedResponseRequest,
  type ResponseCreateRequest,
} from './responses-request.js';
import { RunHost, type RunHostOptions } from './run-host.js';
import { RESPONSES_TOOL_RESULTS } from './tool-results.js';

export interface ResponsesOptions extends RunHostOptions {
  /** How long a finished response stays readable by id. @default 3600000 (1 hour) */
  responseTtlMs?: number;
  /** Finished responses kept at once; past it the oldest finished one is forgotten. @default 10000 */
  maxKeptResponses?: number;
}

export interface CreateResponseOptions {
  /** The request's signal: a foreground run stops when it aborts (its client went away). */
  signal?: AbortSignal | undefined;
  /** Called once a background run has its final status (the server holds a run slot until then). */
  onBackgroundEnd?: (() => void) | undefined;
}

/**
 * RLM as a model behind OpenAI's Responses API, without HTTP: `create()` takes the body of a
 * POST /v1/responses request and answers what the OpenAI API would. The last input item (a user
 * message) is the question; `instructions` and the earlier items (or `rlm_context`) are the
 * context. Function tools belong to the caller: their calls come back as `function_call` items and
 * the run waits for `function_call_output` items (with `previous_response_id`, or the whole input
 * again). `background: true` answers at once with a queued response to poll with `retrieve()`.
 *
 * @example
 * const api = new Responses({ rlmFor: ({ root, sub }) => new RLM({ model: root, subModel: sub }) });
 * const response = await api.create({ model: 'gpt-5-mini', instructions: hugeText, input: 'Who signed?' });
 */
export class Responses {
  private readonly runs: RunHost;
  private readonly kept: KeptResponses;

  constructor(options: ResponsesOptions) {
    this.runs = new RunHost(options);
    this.kept = new KeptResponses({ ttlMs: options.responseTtlMs ?? DEFAULTS.server.responseTtlMs, max: options.maxKeptResponses ?? DEFAULTS.server.maxKeptResponses });
  }

  /** Runs waiting for function call results from their callers. */
  get pausedRuns(): number {
    return this.runs.pausedRuns;
  }

  create(body: ResponseCreateRequest & { stream?: false | null }, options?: CreateResponseOptions): Promise<ResponseObject>;
  create(body: ResponseCreateRequest & { stream: true }, options?: CreateResponseOptions): Promise<AsyncIterable<ResponseEvent>>;
  create(body: ResponseCreateRequest, options?: CreateResponseOptions): Promise<ResponseObject | AsyncIterable<ResponseEvent>>;
  async create(body: ResponseCreateRequest, options: CreateResponseOptions = {}): Promise<ResponseObject | AsyncIterable<ResponseEvent>> {
    const request = parseResponseRequest(body);
    const run = await this.runFor(request);
    const response = new LiveResponse(echoOf(request));
    if (response.background || request.store !== false) this.kept.keep(response);
    if (response.background) {
      const queued = response.snapshot;
      void response.follow(run, this.runs).then(options.onBackgroundEnd);
      return request.stream ? response.events(-1, options.signal) : queued;
    }
    void response.follow(run, this.runs);
    // A client that goes away cancels a foreground run: nobody would see its answer.
    const stop = () => response.cancel(new Error('the client went away'));
    if (options.signal?.aborted) stop();
    options.signal?.addEventListener('abort', stop, { once: true });
    void response.settled.then(() => options.signal?.removeEventListener('abort', stop));
    if (request.stream) return this.foregroundEvents(response);
    return this.foregroundResult(response, options.signal);
  }

  /** A kept response as it stands (GET /v1/responses/{id}). */
  retrieve(id: string): ResponseObject {
    return this.kept.get(id).snapshot;
  }

  /** A kept response's events after `startingAfter`, then live until it is finished; reading stops nothing. */
  stream(id: string, startingAfter?: number, signal?: AbortSignal): AsyncIterable<ResponseEvent> {
    return this.kept.get(id).events(startingAfter, signal);
  }

  /** Stops a background response's run; a finished response is returned as it is. */
  async cancel(id: string): Promise<ResponseObject> {
    const response = this.kept.get(id);
    if (!response.background) {
      throw new ApiError(400, 'invalid_request_error', 'Only background responses can be cancelled: a foreground run stops when its client disconnects.', 'response_id', 'not_background');
    }
    response.cancel(new Error('the response was cancelled'));
    await response.settled;
    return response.snapshot;
  }

  /** Resolves once no background run is working. */
  idle(): Promise<void> {
    return this.kept.idle();
  }

  /** Stops every run: background ones and paused ones (the server is shutting down). */
  close(reason: unknown = new Error('the server is shutting down')): void {
    this.kept.closeAll(reason);
    this.runs.close(reason);
  }

  /** The paused run the input's function call results belong to, or a new run for its question. */
  private async runFor(request: ParsedResponseRequest): Promise<ActiveRun> {
    const results = trailingFunctionOutputs(request);
    if (results.size > 0) return this.runs.resume(results, RESPONSES_TOOL_RESULTS);
    const { query, context } = responseQuestionAndContext(request);
    return this.runs.start({ model: request.model, subModel: request.rlm_sub_model, context, query, output: responseOutput(request), callerTools: responseCallerTools(request) });
  }

  /** The finished response; a failed run is the request's error, as for chat completions. */
  private async foregroundResult(response: LiveResponse, signal: AbortSignal | undefined): Promise<ResponseObject> {
    await response.settled;
    if (response.failure) throw response.failure;
    if (signal?.aborted) throw signal.reason;
    return response.snapshot;
  }

  private async *foregroundEvents(response: LiveResponse): AsyncGenerator<ResponseEvent> {
    try {
      yield* response.events();
    } finally {
      // A client that stops reading before the end cancels the run, as one that disconnects does.
      response.cancel(new Error('the client went away'));
    }
  }
}

function echoOf(request: ParsedResponseRequest): ResponseEcho {
  const parallel = (request as { parallel_tool_calls?: unknown }).parallel_tool_calls;
  return {
    model: request.model,
    // Instructions are most often the huge context: a response that repeats them would carry it back, and keep it for the TTL.
    instructions: null,
    tools: (request.tools ?? []).map((tool) => ({ ...tool, strict: tool.strict ?? null })),
    tool_choice: request.tool_choice ?? 'auto',
    text: { format: request.text?.format ?? { type: 'text' } },
    metadata: request.metadata ?? {},
    parallel_tool_calls: typeof parallel === 'boolean' ? parallel : true,
    previous_response_id: request.previous_response_id ?? null,
    store: request.store ?? true,
    background: request.background ?? false,
  };
}
