import { randomUUID } from 'node:crypto';
import { ToolError } from '../errors.js';
import type { ModelCallEvent, ModelGateway } from '../lm/gateway.js';
import { toolOutputText } from '../lm/tool-text.js';
import type { ToolSpec } from '../lm/types.js';
import type { SandboxOptions } from '../sandbox/sandbox.js';
import { ToolExecutor } from '../tools/executor.js';
import { CallerToolBatch, callerToolValue, type CallerTools } from './caller-tools.js';
import { runChildren, type ParentRun } from './child-runs.js';
import { routeHostCall, type BlockScope, type HostServices, type ToolHostCall } from './host-calls.js';
import { LlmQueries } from './llm-queries.js';
import type { OutputSchema } from './output-schema.js';

interface BlockServicesOptions {
  /** The run whose blocks these serve: its settings, its events, its children. */
  run: ParentRun;
  /** The run's gateway; sub-calls go through it, recorded on their block. */
  gateway: ModelGateway;
  callerTools: CallerTools | undefined;
  nextCallerCallId: () => string;
  /** Aborts when the run must stop: the caller's tools that code handed back wait on it. */
  signal: AbortSignal;
  /** The schema of the run's final answer: FINAL in a block is checked against it. */
  output?: OutputSchema | undefined;
}

/**
 * What model code in a run's sandbox reaches through its host calls: sub-model calls, child runs,
 * host tools and the caller's tools. Each block gets its own scope, where its sub-calls and tool
 * calls are recorded. Host tools are synchronous in the sandbox; the caller's tools (which shadow
 * host tools of the same name) are asynchronous, collected per block and handed back when the
 * block waits.
 */
export class BlockServices {
  readonly #options: BlockServicesOptions;
  readonly #toolExecutor: ToolExecutor;
  readonly #callerNames: Set<string>;
  readonly #hostServices: HostServices;
  /** The tools model code sees: host tools, then the caller's. */
  readonly toolSpecs: ToolSpec[];

  constructor(options: BlockServicesOptions) {
    this.#options = options;
    const { settings } = options.run.shared;
    this.#toolExecutor = new ToolExecutor(settings.tools);
    const callerSpecs = options.callerTools?.specs ?? [];
    this.#callerNames = new Set(callerSpecs.map((spec) => spec.function.name));
    this.toolSpecs = [...settings.tools.definitions().filter((spec) => !this.#callerNames.has(spec.function.name)), ...callerSpecs];
    const canRecurse = options.run.depth + 1 < settings.maxDepth;
    this.#hostServices = {
      ...(canRecurse && { runChildren: (call, signal, scope) => runChildren(call, { parent: options.run, signal, subcalls: scope.subcalls }) }),
      ...(this.toolSpecs.length > 0 && { callTool: (call, signal, scope) => this.#callTool(call, signal, scope) }),
    };
  }

  /** The schema of the run's final answer, when the caller gave one. */
  get output(): OutputSchema | undefined {
    return this.#options.output;
  }

  /** Whether the sandbox worker checks FINAL in the run's blocks against the output schema (see Sandbox.execute). */
  get checksFinal(): boolean {
    return this.#options.output?.blockSchema !== undefined;
  }

  /** The tools answered asynchronously in the sandbox: the caller's. */
  get asyncTools(): string[] {
    return [...this.#callerNames];
  }

  /**
   * The sandbox's handlers. Each call is served by its block's scope, so in a session, where the
   * first completion's run made the sandbox, later completions are served by their own runs. Calls
   * outside any block (setup code, a FINAL_VAR lookup) get a scope of their own.
   */
  get handlers(): Required<Pick<SandboxOptions<BlockScope>, 'onHostCall' | 'onBlockWaiting'>> {
    return {
      onHostCall: (call, { signal, scope }) => routeHostCall({ call, signal, scope: scope ?? this.newScope() }),
      onBlockWaiting: ({ scope }) => scope?.callerBatch?.flush(scope.runSignal),
    };
  }

  /** A block's scope: sub-calls made through it are reported as events and recorded on its block. */
  newScope(): BlockScope {
    const { run, callerTools, nextCallerCallId } = this.#options;
    const scope: Omit<BlockScope, 'queries'> = {
      subcalls: [],
      toolCalls: [],
      services: this.#hostServices,
      runSignal: this.#options.signal,
      ...(callerTools && { callerBatch: new CallerToolBatch(callerTools, nextCallerCallId, (calls) => run.emit({ type: 'caller-tool-calls', calls })) }),
    };
    const { settings, budget } = run.shared;
    const queries = new LlmQueries({
      gateway: this.#options.gateway.with({ purpose: 'sub', onEvent: (event) => this.#recordSubcall(event, scope) }),
      defaultModel: settings.subModel,
      maxToolIterations: settings.maxToolIterations,
      remainingCalls: () => budget.remainingCalls(),
    });
    return { ...scope, queries };
  }

  #recordSubcall(event: ModelCallEvent, scope: Pick<BlockScope, 'subcalls'>): void {
    const { run } = this.#options;
    run.emit(event);
    if (event.type !== 'llm-call-end') return;
    run.shared.onRequest?.(event.request, event.response);
    scope.subcalls.push({
      kind: 'llm',
      model: event.model,
      prompt: event.request.messages,
      response: event.response?.content ?? null,
      durationMs: event.durationMs,
      usage: event.response?.usage,
      ...(event.error && { error: `${event.error.name}: ${event.error.message}` }),
    });
  }

  #callTool(call: ToolHostCall, signal: AbortSignal, scope: BlockScope): Promise<unknown> {
    return this.#callerNames.has(call.name) ? this.#callCallerTool(call, scope) : this.#callHostTool(call, signal, scope);
  }

  /** A caller's tool called from model code: waits in the block's batch until the block waits. */
  async #callCallerTool(call: ToolHostCall, scope: BlockScope): Promise<unknown> {
    return callerToolValue(await scope.callerBatch!.add(call.name, call.arguments));
  }

  /** A host tool called from model code; a failed call becomes an error the code can catch. */
  async #callHostTool(call: ToolHostCall, signal: AbortSignal, scope: BlockScope): Promise<unknown> {
    const { run } = this.#options;
    const callId = randomUUID();
    run.emit({ type: 'tool-call-start', callId, toolName: call.name, arguments: call.arguments });
    const result = await this.#toolExecutor.executeOne({ callId, name: call.name, arguments: call.arguments }, { signal, invocationId: run.runId });
    const outcome = result.success ? { result: result.result } : { error: result.error };
    scope.toolCalls.push({ name: result.toolName, callId, success: result.success, ...outcome, durationMs: result.durationMs });
    run.emit({
      type: 'tool-call-end',
      callId,
      toolName: result.toolName,
      durationMs: result.durationMs,
      ...(result.success ? { result: toolOutputText(result.result, JSON.stringify) } : { error: result.error }),
    });
    if (!result.success) throw new ToolError(result.error ?? `${call.name} failed`);
    return result.result;
  }
}
