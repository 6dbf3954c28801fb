import { describeError } from '../errors.js';
import type { SubcallRecord } from './events.js';
import { settleCalls } from './fan-out.js';
import type { ChildCall } from './host-calls.js';
import type { RunEventInput, RunOutcome, TreeShared } from './run-types.js';

/** What a run lends its children: its place in the tree, and a way to start a child run. */
export interface ParentRun {
  readonly runId: string;
  readonly depth: number;
  readonly rootModel: string;
  readonly shared: TreeShared;
  emit(event: RunEventInput): void;
  createChild(model: string, signal: AbortSignal): { runId: string; complete(input: { context: unknown; query: undefined }): Promise<RunOutcome> };
}

/** Who asked for child runs: the parent run, the signal of its block, and where the block's sub-calls are recorded. */
interface ChildRunsOrigin {
  parent: ParentRun;
  signal: AbortSignal;
  subcalls: SubcallRecord[];
}

/**
 * `rlm_query` / `rlm_query_batched`: each prompt becomes the context of a child run one level
 * deeper. Children wait in a queue per depth, so a parent waiting on its children never holds a
 * slot they need. Each child is recorded as a sub-call of the block that started it.
 */
export function runChildren(call: ChildCall, origin: ChildRunsOrigin): Promise<string | string[]> {
  const { parent, signal } = origin;
  const prompts = call.kind === 'rlm_query' ? [call.prompt] : call.prompts;
  const runs = prompts.map((prompt) => parent.shared.childQueues.run(parent.depth + 1, () => runChild(prompt, call.model, origin), signal));
  return settleCalls(call.kind === 'rlm_query' ? 'single' : 'batch', runs);
}

async function runChild(prompt: unknown, model: string | undefined, { parent, signal, subcalls }: ChildRunsOrigin): Promise<string> {
  signal.throwIfAborted();
  const childModel = model ?? parent.rootModel;
  const child = parent.createChild(childModel, signal);
  const started = performance.now();
  parent.emit({ type: 'subcall-start', childRunId: child.runId, model: childModel, promptPreview: preview(prompt) });
  const record: SubcallRecord = { kind: 'rlm', model: childModel, prompt, response: null, durationMs: 0, usage: undefined };
  subcalls.push(record);
  try {
    const outcome = await child.complete({ context: prompt, query: undefined });
    record.response = outcome.response;
    record.iterations = outcome.trajectory;
    return outcome.response;
  } catch (error) {
    const { name, message } = describeError(error);
    record.error = `${name}: ${message}`;
    throw error;
  } finally {
    record.durationMs = performance.now() - started;
    parent.emit({
      type: 'subcall-end',
      childRunId: child.runId,
      model: childModel,
      durationMs: record.durationMs,
      ...(record.error !== undefined && { error: record.error }),
    });
  }
}

function preview(prompt: unknown): string {
  const text = typeof prompt === 'string' ? prompt : JSON.stringify(prompt);
  return text.length > 200 ? `${text.slice(0, 200)}...` : text;
}
