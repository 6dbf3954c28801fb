import type { ActiveRun } from './active-run.js';
import { chunk, chunksOf, completionId, completionOf, type ChatCompletion, type ChatCompletionChunk } from './chat-responses.js';
import { callerToolsOf, outputOf, parseRequest, questionAndContext, trailingToolResults, type ChatCompletionRequest, type ParsedRequest } from './request.js';
import { RunHost, type RunHostOptions } from './run-host.js';
import { CHAT_TOOL_RESULTS } from './tool-results.js';

export { splitModelName } from './run-host.js';

export type ChatCompletionsOptions = RunHostOptions;

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
  private readonly runs: RunHost;

  constructor(options: ChatCompletionsOptions) {
    this.runs = new RunHost(options);
  }

  /** Runs waiting for tool results from their callers. */
  get pausedRuns(): number {
    return this.runs.pausedRuns;
  }

  create(body: ChatCompletionRequest & { stream?: false | null }, options?: { signal?: AbortSignal }): Promise<ChatCompletion>;
  create(body: ChatCompletionRequest & { stream: true }, options?: { signal?: AbortSignal }): Promise<AsyncIterable<ChatCompletionChunk>>;
  create(body: ChatCompletionRequest, options?: { signal?: AbortSignal }): Promise<ChatCompletion | AsyncIterable<ChatCompletionChunk>>;
  async create(body: ChatCompletionRequest, options: { signal?: AbortSignal } = {}): Promise<ChatCompletion | AsyncIterable<ChatCompletionChunk>> {
    const request = parseRequest(body);
    const run = await this.runFor(request);
    if (request.stream) return this.stream(request, run, options.signal);
    const step = await this.runs.nextStep(run, options.signal, 'response_format');
    return completionOf(step, request.model, run.takeUsage());
  }

  /** Stops every paused run (the server is shutting down). */
  close(reason?: unknown): void {
    this.runs.close(reason);
  }

  /** The paused run the request's tool results belong to, or a new run for its question. */
  private async runFor(request: ParsedRequest): Promise<ActiveRun> {
    const results = trailingToolResults(request.messages);
    if (results.size > 0) return this.runs.resume(results, CHAT_TOOL_RESULTS);
    const { query, context } = questionAndContext(request);
    return this.runs.start({ model: request.model, subModel: request.rlm_sub_model, context, query, output: outputOf(request), callerTools: callerToolsOf(request) });
  }

  private async *stream(request: ParsedRequest, run: ActiveRun, signal: AbortSignal | undefined): AsyncGenerator<ChatCompletionChunk> {
    const id = completionId();
    let finished = false;
    try {
      yield chunk(id, request.model, { role: 'assistant', content: '' });
      const step = await this.runs.nextStep(run, signal, 'response_format');
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
