import { randomUUID } from 'node:crypto';
import { appendFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { UsageSummary } from '../lm/usage.js';
import type { CompactionRecord, IterationRecord, SubcallRecord } from './events.js';

interface TrajectoryMetadata {
  rootModel: string;
  subModel: string;
  maxDepth: number;
  maxIterations: number;
  baseURL: string | undefined;
  sandbox: Record<string, unknown>;
  /** The question, when the run was given one (an rlm addition to the reference schema). */
  query: string | undefined;
  /** The JSON Schema of the answer, when the caller gave one (an rlm addition). */
  outputSchema?: Record<string, unknown> | undefined;
}

/**
 * Writes a run's trajectory as JSON lines in the reference RLM logger's schema, so its visualizer
 * opens our logs: a `metadata` line, then one `iteration` line per turn with `prompt`, `response`,
 * `code_blocks[].result.{stdout, stderr, locals, execution_time, rlm_calls, final_answer}`,
 * `final_answer` and `iteration_time`. Child runs nest inside the `rlm_calls` entry that started
 * them. Each line is appended as soon as its iteration ends, so a crash loses nothing before it.
 */
export class TrajectoryLogger {
  readonly path: string;
  private count = 0;

  constructor(
    logDir: string,
    private readonly secrets: string[] = [],
  ) {
    mkdirSync(logDir, { recursive: true });
    const stamp = new Date().toISOString().replace(/[:.]/g, '-').replace('T', '_').slice(0, 19);
    this.path = join(logDir, `rlm_${stamp}_${randomUUID().slice(0, 8)}.jsonl`);
  }

  metadata(metadata: TrajectoryMetadata): void {
    this.write({
      type: 'metadata',
      timestamp: new Date().toISOString(),
      root_model: metadata.rootModel,
      max_depth: metadata.maxDepth,
      max_iterations: metadata.maxIterations,
      backend: 'openai',
      backend_kwargs: { model_name: metadata.rootModel, ...(metadata.baseURL && { base_url: metadata.baseURL }) },
      environment_type: 'isolated-vm',
      environment_kwargs: metadata.sandbox,
      other_backends: metadata.subModel === metadata.rootModel ? null : [metadata.subModel],
      ...(metadata.query !== undefined && { query: metadata.query }),
      ...(metadata.outputSchema !== undefined && { output_schema: metadata.outputSchema }),
    });
  }

  iteration(record: IterationRecord): void {
    this.count += 1;
    this.write({ type: 'iteration', iteration: this.count, timestamp: new Date().toISOString(), ...iterationJson(record) });
  }

  /** A compaction of the root conversation (an rlm addition to the reference schema). */
  compaction(record: CompactionRecord): void {
    this.write({
      type: 'compaction',
      timestamp: new Date().toISOString(),
      after_iteration: this.count,
      tokens_before: record.tokensBefore,
      tokens_after: record.tokensAfter,
      context_window: record.contextWindow,
      messages_replaced: record.messagesReplaced,
      summary: record.summary,
      execution_time: record.durationMs / 1000,
    });
  }

  /**
   * The last line: how the run ended. `completed` with the answer (and whether it was forced), `limit` or `error` with what went
   * wrong, `interrupted` when the caller cancelled it. A log without this line ended early (a crash).
   */
  end(outcome: {
    status: 'completed' | 'limit' | 'error' | 'interrupted';
    answer?: string | undefined;
    /** The answer was asked for after the last iteration, not given with FINAL. */
    forced?: boolean;
    error?: { name: string; code?: string | undefined; message: string } | undefined;
    partialAnswer?: string | undefined;
    usage: UsageSummary;
  }): void {
    this.write({ type: 'run_end', timestamp: new Date().toISOString(), iterations: this.count, ...outcome });
  }

  private write(entry: unknown): void {
    let line = JSON.stringify(entry);
    for (const secret of this.secrets) if (secret) line = line.split(secret).join('[redacted]');
    appendFileSync(this.path, `${line}\n`);
  }
}

function iterationJson(record: IterationRecord): Record<string, unknown> {
  return {
    prompt: record.prompt,
    response: record.response,
    code_blocks: record.codeBlocks.map((block) => ({
      code: block.code,
      result: {
        stdout: block.result.stdout,
        stderr: block.result.error?.stack ?? '',
        locals: Object.fromEntries(block.result.variables.map((variable) => [variable.name, variable.type])),
        execution_time: block.result.durationMs / 1000,
        rlm_calls: block.subcalls.map(subcallJson),
        final_answer: block.result.final ?? null,
        ...(block.rejectedFinals && { rejected_finals: block.rejectedFinals }),
        tool_calls: block.toolCalls.map((call) => ({
          name: call.name,
          call_id: call.callId,
          success: call.success,
          ...(call.success ? { result: call.result } : { error: call.error }),
          execution_time: call.durationMs / 1000,
        })),
      },
    })),
    final_answer: record.finalAnswer,
    ...(record.rejectedFinal && { rejected_final: record.rejectedFinal }),
    iteration_time: record.durationMs / 1000,
  };
}

function subcallJson(call: SubcallRecord): Record<string, unknown> {
  return {
    root_model: call.model,
    prompt: call.prompt,
    response: call.response ?? '',
    usage_summary: {
      model_usage_summaries: call.usage
        ? { [call.model]: { total_calls: 1, total_input_tokens: call.usage.inputTokens, total_output_tokens: call.usage.outputTokens } }
        : {},
    },
    execution_time: call.durationMs / 1000,
    ...(call.error !== undefined && { error: call.error }),
    ...(call.iterations && { metadata: { kind: 'rlm', iterations: call.iterations.map(iterationJson) } }),
  };
}
