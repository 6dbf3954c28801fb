import { randomUUID } from 'node:crypto';
import { HostCallError } from '../errors.js';
import type { ModelGateway } from '../lm/gateway.js';
import { driveToolLoop, toolLoop, type ToolInvocation } from '../lm/tool-loop.js';
import type { ChatMessage, ChatRequest, ToolChoice, ToolSpec } from '../lm/types.js';
import type { HostCall, ToolHandBackReply } from '../sandbox/protocol.js';
import { itemResult, settleCalls } from './fan-out.js';
import type { OutputSchema } from './output-schema.js';
import { StructuredQueries, querySchemaOf } from './structured-query.js';

type QueryCall = Extract<HostCall, { kind: 'llm_query' | 'llm_query_batched' }>;
type Prompt = Extract<HostCall, { kind: 'llm_query' }>['prompt'];

interface LlmQueriesOptions {
  gateway: ModelGateway;
  /** Model used when model code does not name one. */
  defaultModel: string;
  maxToolIterations: number;
  /** Model calls the run may still make (maxLlmCalls); undefined when unlimited. @default unlimited */
  remainingCalls?: () => number | undefined;
}

/**
 * Serves `llm_query` and `llm_query_batched` from sandbox code (see settleCalls for how batches
 * answer). With tools, each prompt gets its own tool-calling loop on the host; rounds of tool calls
 * are handed back to the sandbox (see ToolHandBack), and the loops of a batch keep running
 * concurrently.
 */
export class LlmQueries {
  private readonly handBacks = new Map<string, ToolHandBack>();
  private readonly structured: StructuredQueries;

  constructor(private readonly options: LlmQueriesOptions) {
    this.structured = new StructuredQueries((request) => options.gateway.chat(request));
  }

  async query(call: QueryCall, signal: AbortSignal): Promise<unknown> {
    const prompts = call.kind === 'llm_query' ? [call.prompt] : call.prompts;
    const schema = this.schemaOf(call);
    this.checkCallsLeft(call.kind, prompts.length);
    const requests = prompts.map((prompt) => this.request(prompt, call, signal));
    if (call.tools) {
      const handBack = new ToolHandBack(requests, call.kind === 'llm_query_batched', this.options, signal);
      this.handBacks.set(handBack.id, handBack);
      signal.addEventListener('abort', () => this.handBacks.delete(handBack.id), { once: true });
      return this.advance(handBack);
    }
    const answers = requests.map((request) => (schema ? this.structured.answer(request, schema) : this.answer(request)));
    return settleCalls(call.kind === 'llm_query' ? 'single' : 'batch', answers);
  }

  /** The call's schema, checked before any model call; the sandbox refuses these combinations too. */
  private schemaOf(call: QueryCall): OutputSchema | undefined {
    if (!call.schema) return undefined;
    if (call.tools || call.response_format) throw new HostCallError('TypeError', `${call.kind}: schema cannot be combined with tools or response_format.`);
    return querySchemaOf(call.kind, call.schema);
  }

  /**
   * A batch larger than the model calls left would trip maxLlmCalls part-way, after spending on
   * some of its prompts: refuse it before any request is made, so model code can send fewer. With
   * no calls left at all, the first call trips the limit as usual.
   */
  private checkCallsLeft(kind: string, count: number) {
    const remaining = this.options.remainingCalls?.();
    if (remaining === undefined || remaining === 0 || count <= remaining) return;
    throw new HostCallError(
      'RangeError',
      `${kind}: ${count} prompts, but only ${remaining} model calls remain under the run's call limit (maxLlmCalls). Send at most ${remaining}.`,
    );
  }

  /** Outputs of tool calls the sandbox ran; answers with the next round or the final value. */
  async toolResults(call: Extract<HostCall, { kind: 'tool_results' }>): Promise<ToolHandBackReply> {
    const handBack = this.handBacks.get(call.handBack);
    if (!handBack) throw new HostCallError('Error', `tool_results: unknown or finished tool loop ${call.handBack}`);
    handBack.deliver(call.results);
    return this.advance(handBack);
  }

  private async advance(handBack: ToolHandBack): Promise<ToolHandBackReply> {
    try {
      const reply = await handBack.next();
      if (reply.done) this.handBacks.delete(handBack.id);
      return reply;
    } catch (error) {
      this.handBacks.delete(handBack.id);
      throw error;
    }
  }

  private request(prompt: Prompt, call: QueryCall, signal: AbortSignal): ChatRequest {
    const messages: ChatMessage[] = typeof prompt === 'string' ? [{ role: 'user', content: prompt }] : (prompt as ChatMessage[]);
    return {
      model: call.model ?? this.options.defaultModel,
      messages,
      ...(call.tools && { tools: call.tools as ToolSpec[] }),
      ...(call.tool_choice && { toolChoice: call.tool_choice as ToolChoice }),
      ...(call.response_format && { responseFormat: call.response_format }),
      signal,
    };
  }

  private async answer(request: ChatRequest): Promise<string> {
    const response = await this.options.gateway.chat(request);
    return response.content ?? '';
  }
}

/**
 * The tool-calling loops of one `llm_query` / `llm_query_batched` call whose tool handler lives in
 * the sandbox. Each loop runs on the host; when one needs tool outputs, its calls go to an outbox
 * the sandbox collects (through the reply to its pending host call), and the loop waits for
 * `deliver`. Other loops keep calling the model meanwhile.
 */
class ToolHandBack {
  readonly id = randomUUID();
  private readonly outbox: { id: string; name: string; arguments: Record<string, unknown> }[] = [];
  private readonly waiting = new Map<string, { resolve: (output: string) => void; reject: (reason: unknown) => void }>();
  private readonly outcome: Promise<unknown>;
  private settled = false;
  private notify: () => void = () => {};
  private nextRequestId = 0;

  constructor(requests: ChatRequest[], batched: boolean, options: LlmQueriesOptions, signal: AbortSignal) {
    const loops = requests.map((request) =>
      driveToolLoop(toolLoop(request, options.maxToolIterations), (next) => options.gateway.chat(next), (calls) => this.handOver(calls)),
    );
    this.outcome = (batched ? Promise.allSettled(loops).then((results) => results.map(itemResult)) : loops[0]!).finally(() => {
      this.settled = true;
      this.notify();
    });
    this.outcome.catch(() => {}); // reported through next()
    // When the block ends, loops still waiting for tool outputs stop too.
    signal.addEventListener(
      'abort',
      () => {
        for (const { reject } of this.waiting.values()) reject(signal.reason);
        this.waiting.clear();
      },
      { once: true },
    );
  }

  /** Waits until there are tool calls for the sandbox, or every loop has finished. */
  async next(): Promise<ToolHandBackReply> {
    while (this.outbox.length === 0 && !this.settled) {
      await new Promise<void>((resolve) => {
        this.notify = resolve;
      });
    }
    if (this.outbox.length > 0) return { done: false, handBack: this.id, requests: this.outbox.splice(0) };
    return { done: true, value: await this.outcome };
  }

  deliver(results: { id: string; output: string }[]): void {
    for (const { id, output } of results) {
      const waiter = this.waiting.get(id);
      if (!waiter) throw new HostCallError('Error', `tool_results: no pending tool call with id ${id}`);
      this.waiting.delete(id);
      waiter.resolve(output);
    }
  }

  private handOver(calls: ToolInvocation[]): Promise<string[]> {
    const outputs = calls.map(
      (call) =>
        new Promise<string>((resolve, reject) => {
          const id = `${this.nextRequestId++}`;
          this.waiting.set(id, { resolve, reject });
          this.outbox.push({ id, name: call.name, arguments: call.arguments });
        }),
    );
    this.notify();
    return Promise.all(outputs);
  }
}
