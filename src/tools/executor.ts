import { randomUUID } from 'node:crypto';
import PQueue from 'p-queue';
import { DEFAULTS } from '../defaults.js';
import { untilAborted } from '../abort.js';
import { describeError } from '../errors.js';
import { parseToolArguments, unknownToolMessage } from '../lm/tool-arguments.js';
import type { ExecutionPolicy } from './define.js';
import type { ToolRegistry } from './registry.js';

/** One requested call: arguments as an object, or as the JSON text a model wrote. */
interface ToolCallRequest {
  callId?: string;
  name: string;
  arguments: unknown;
}

export interface ToolResult {
  callId: string;
  toolName: string;
  success: boolean;
  /** The tool's return value (on success). */
  result?: unknown;
  /** What went wrong, written for the model (on failure). */
  error?: string;
  durationMs: number;
}

interface ToolExecutorOptions {
  /** Policy for tools that do not set one. @default 'parallel' */
  defaultPolicy?: ExecutionPolicy;
  /** Parallel tool calls running at once. @default 10 */
  maxConcurrency?: number;
  /** Per-call timeout in ms for tools without their own (long-running tools have none). @default 30000 */
  timeoutMs?: number;
  validateArguments?: boolean;
  onToolStart?: (name: string, callId: string, args: unknown) => void;
  onToolEnd?: (result: ToolResult) => void;
  onToolError?: (name: string, callId: string, error: string) => void;
}

/**
 * Runs tool calls: sequential tools one at a time in call order, parallel ones concurrently up to
 * `maxConcurrency`, each with validation and a timeout. It never throws because a tool failed:
 * unknown tools, invalid arguments, timeouts, aborts and exceptions all come back as results, in
 * the order of the calls.
 */
export class ToolExecutor {
  private readonly options: Required<Pick<ToolExecutorOptions, 'defaultPolicy' | 'maxConcurrency' | 'timeoutMs' | 'validateArguments'>> & ToolExecutorOptions;

  constructor(
    private readonly registry: ToolRegistry,
    options: ToolExecutorOptions = {},
  ) {
    this.options = {
      defaultPolicy: 'parallel',
      maxConcurrency: DEFAULTS.tools.maxConcurrency,
      timeoutMs: DEFAULTS.tools.timeoutMs,
      validateArguments: true,
      ...options,
    };
  }

  async execute(calls: ToolCallRequest[], options: { signal?: AbortSignal; invocationId?: string } = {}): Promise<ToolResult[]> {
    const invocationId = options.invocationId ?? randomUUID();
    const parallel = new PQueue({ concurrency: this.options.maxConcurrency });
    const sequential = new PQueue({ concurrency: 1 });
    return Promise.all(
      calls.map((call) => {
        const queue = this.policyOf(call.name) === 'sequential' ? sequential : parallel;
        return queue.add(() => this.executeOne(call, { invocationId, ...(options.signal && { signal: options.signal }) })) as Promise<ToolResult>;
      }),
    );
  }

  /** Runs one call now (no queueing). */
  async executeOne(call: ToolCallRequest, options: { signal?: AbortSignal; invocationId?: string } = {}): Promise<ToolResult> {
    const callId = call.callId ?? `call_${randomUUID().slice(0, 12)}`;
    const started = performance.now();
    const finish = (outcome: { result: unknown } | { error: string }): ToolResult => {
      const result: ToolResult = { callId, toolName: call.name, success: 'result' in outcome, durationMs: performance.now() - started, ...outcome };
      if ('error' in outcome) this.options.onToolError?.(call.name, callId, outcome.error);
      this.options.onToolEnd?.(result);
      return result;
    };

    const tool = this.registry.get(call.name);
    let args = call.arguments;
    this.options.onToolStart?.(call.name, callId, args);
    if (!tool) return finish({ error: unknownToolMessage(call.name, this.registry.names()) });
    if (typeof args === 'string') {
      const parsed = parseToolArguments(call.name, args);
      if (!parsed.ok) return finish({ error: parsed.message });
      args = parsed.value;
    }
    if (this.options.validateArguments) {
      const checked = tool.validate(args ?? {});
      if (!checked.ok) return finish({ error: checked.message });
      args = checked.value;
    }
    if (options.signal?.aborted) return finish({ error: `${call.name} was cancelled before it started.` });

    const timeoutMs = tool.timeoutMs ?? (tool.longRunning ? undefined : this.options.timeoutMs);
    // The tool's signal aborts when the caller gives up, when the time is up, or when the call ends.
    const ended = new AbortController();
    const timeout = timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs);
    const signal = AbortSignal.any([ended.signal, ...(options.signal ? [options.signal] : []), ...(timeout ? [timeout] : [])]);
    try {
      const context = { callId, invocationId: options.invocationId ?? callId, signal };
      const value = await untilAborted(Promise.resolve().then(() => tool.execute(args as never, context)), signal);
      return finish({ result: value });
    } catch (error) {
      if (options.signal?.aborted) return finish({ error: `${call.name} was cancelled.` });
      if (timeout?.aborted) return finish({ error: `${call.name} timed out after ${timeoutMs} ms.` });
      return finish({ error: describeError(error).message });
    } finally {
      ended.abort(new Error('the tool call has ended'));
    }
  }

  private policyOf(name: string): ExecutionPolicy {
    return this.registry.get(name)?.executionPolicy ?? this.options.defaultPolicy;
  }
}
