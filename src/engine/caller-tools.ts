import { unknownToolMessage } from '../lm/tool-arguments.js';
import { toolCallMessage, type ChatMessage, type ToolCall, type ToolChoice, type ToolSpec } from '../lm/types.js';

/**
 * Tools that belong to whoever started the run (a client of `rlm serve`, an application): the run
 * cannot execute them, so it hands their calls back and waits for the results. The root model
 * sees them as native tools; model code calls them as `await tools.NAME(args)`.
 */
export interface CallerTools {
  specs: ToolSpec[];
  toolChoice?: ToolChoice | undefined;
  /**
   * Has the calls run elsewhere and resolves with one output text per call, in order. The run
   * waits for it, however long it takes; `signal` aborts when the run ends.
   */
  call(calls: ToolCall[], signal: AbortSignal): Promise<string[]>;
}

/**
 * One block's calls to caller tools, collected while the block runs and sent together when it
 * stops to wait for them: `Promise.all([tools.a(), tools.b()])` becomes one hand-back of two calls.
 */
export class CallerToolBatch {
  private readonly pending: { call: ToolCall; resolve: (output: string) => void; reject: (reason: unknown) => void }[] = [];

  constructor(
    private readonly tools: CallerTools,
    private readonly nextId: () => string,
    private readonly onHandBack: (calls: ToolCall[]) => void,
  ) {}

  add(name: string, args: unknown): Promise<string> {
    return new Promise((resolve, reject) => {
      this.pending.push({ call: { id: this.nextId(), name, arguments: JSON.stringify(args ?? {}) }, resolve, reject });
    });
  }

  /** Sends what was collected; called when the block waits on its calls. */
  flush(signal: AbortSignal): void {
    const batch = this.pending.splice(0);
    if (batch.length === 0) return;
    this.onHandBack(batch.map((entry) => entry.call));
    this.tools.call(batch.map((entry) => entry.call), signal).then(
      (outputs) => batch.forEach((entry, index) => entry.resolve(outputs[index] ?? '')),
      (error: unknown) => batch.forEach((entry) => entry.reject(error)),
    );
  }
}

/** A caller tool's output as model code gets it: parsed when it is JSON, else the text. */
export function callerToolValue(output: string): unknown {
  try {
    return JSON.parse(output);
  } catch {
    return output;
  }
}

/** Ids of caller tool calls, as the caller sees them: unique in the run, whatever ids the upstream model chose. */
export function callerCallIds(runId: string): () => string {
  let calls = 0;
  return () => `call_${runId.slice(0, 8)}_${++calls}`;
}

interface RootToolCalls {
  callerTools: CallerTools;
  /** The root model's reply that made the calls (its text, if any). */
  reply: string;
  calls: ToolCall[];
  signal: AbortSignal;
  /** Reports the calls handed back. */
  onHandBack: (calls: ToolCall[]) => void;
}

/**
 * The root model called tools of the caller: hands them back and waits for the results, and returns
 * the tool-call turn that continues the conversation. Calls to tools the caller does not have are
 * answered here.
 */
export async function handBackRootCalls({ callerTools, reply, calls, signal, onHandBack }: RootToolCalls): Promise<ChatMessage[]> {
  const known = new Set(callerTools.specs.map((spec) => spec.function.name));
  const handedBack = calls.filter((call) => known.has(call.name));
  onHandBack(handedBack);
  const outputs = handedBack.length > 0 ? await callerTools.call(handedBack, signal) : [];
  signal.throwIfAborted();
  const outputById = new Map(handedBack.map((call, index) => [call.id, outputs[index] ?? '']));
  return [
    { role: 'assistant', content: reply || null, tool_calls: calls.map(toolCallMessage) },
    ...calls.map((call): ChatMessage => ({ role: 'tool', tool_call_id: call.id, content: outputById.get(call.id) ?? `Error: ${unknownToolMessage(call.name, known)}` })),
  ];
}
