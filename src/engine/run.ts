import { randomUUID } from 'node:crypto';
import type { ModelGateway } from '../lm/gateway.js';
import type { ChatMessage, ToolCall } from '../lm/types.js';
import { BlockServices } from './block-services.js';
import { callerCallIds, handBackRootCalls } from './caller-tools.js';
import type { ParentRun } from './child-runs.js';
import { CodeBlockRunner } from './code-blocks.js';
import { contextWindowOf } from './compaction.js';
import type { IterationRecord, RlmEvent } from './events.js';
import { FinalAnswerResolver } from './final-answer.js';
import { RunFailedError, RunLimitError } from './limits.js';
import type { OutputSchema } from './output-schema.js';
import { parseReply, partialAnswerOf } from './parsing.js';
import { contextMessage, message, systemPrompt } from './prompts.js';
import { RootConversation, type RootPrompt } from './root-conversation.js';
import { RunSandbox } from './run-sandbox.js';
import type { RunEventInput, RunInput, RunOutcome, RunPlacement, TreeShared, TurnOutcome } from './run-types.js';

interface RunOptions {
  shared: TreeShared;
  gateway: ModelGateway;
  /** 0 for the root run, 1 for its children, ... */
  depth: number;
  rootModel: string;
  placement?: RunPlacement;
}

/** What the turns of one completion work with. */
interface RunParts {
  conversation: RootConversation;
  sandbox: RunSandbox;
  blocks: CodeBlockRunner;
  answers: FinalAnswerResolver;
  /** The schema of the final answer, when the caller gave one. */
  output: OutputSchema | undefined;
  /** Aborts when this run must stop: its tree's limits, its parent block. */
  signal: AbortSignal;
}

/**
 * One RLM run: the loop of root-model turns over one sandbox, at some depth of the run tree. The
 * parts of a turn live in their own modules: the conversation (root-conversation.ts), the code
 * blocks (code-blocks.ts) and what they call (block-services.ts), the sandbox (run-sandbox.ts) and
 * the final answer (final-answer.ts).
 */
export class Run implements ParentRun {
  readonly runId = randomUUID();
  readonly shared: TreeShared;
  readonly depth: number;
  readonly rootModel: string;
  readonly #gateway: ModelGateway;
  readonly #placement: RunPlacement;
  readonly #nextCallerCallId = callerCallIds(this.runId);
  #bestPartial: string | undefined;

  constructor(options: RunOptions) {
    this.shared = options.shared;
    this.depth = options.depth;
    this.rootModel = options.rootModel;
    this.#placement = options.placement ?? {};
    this.#gateway = options.gateway.with({ onEvent: (event) => this.emit(event) });
  }

  /** The best answer the run had so far, should it stop now (see partialAnswerOf). */
  get partialAnswer(): string | undefined {
    return this.#bestPartial;
  }

  /** Runs turns until the root model gives a final answer, a limit stops the run, or turns run out. */
  async complete(input: RunInput): Promise<RunOutcome> {
    const { maxIterations } = this.shared.settings;
    this.emit({ type: 'run-start', model: this.rootModel, parentRunId: this.#placement.parentRunId, query: input.query, logPath: this.#placement.logger?.path });
    const parts = this.#start(input);
    const { conversation, signal } = parts;
    try {
      const trajectory: IterationRecord[] = [];
      let notes: string[] = [];
      let errorStreak = 0;
      for (let index = 1; index <= maxIterations; index++) {
        signal.throwIfAborted();
        this.emit({ type: 'iteration-start', iteration: index, maxIterations });
        await conversation.fit(signal);
        const outcome = await this.#takeTurn({ ...parts, index, notes });
        trajectory.push(outcome.record);
        await this.#reportIteration(outcome.record);
        switch (outcome.type) {
          case 'final':
            conversation.add({ role: 'assistant', content: outcome.reply });
            this.emit({ type: 'final', answer: outcome.answer, source: outcome.source });
            return { response: outcome.answer, ...(parts.output && { output: outcome.output }), forced: false, iterations: index, trajectory, messages: [...conversation.messages] };
          case 'continue':
            conversation.add({ role: 'assistant', content: outcome.reply });
            errorStreak = outcome.codeFailed ? errorStreak + 1 : 0;
            this.#checkErrorStreak(errorStreak);
            conversation.add(...outcome.outputs);
            notes = outcome.notes;
            break;
          case 'caller-tools': {
            // The turn prompt stays before the tool-call turn, so the model reads the results after
            // the question, and the next request can end with them (see alternateRoles).
            conversation.add(...outcome.asked);
            const onHandBack = (calls: ToolCall[]) => this.emit({ type: 'caller-tool-calls', calls });
            conversation.add(...(await handBackRootCalls({ callerTools: this.#placement.callerTools!, reply: outcome.reply, calls: outcome.calls, signal, onHandBack })));
            notes = [];
            break;
          }
        }
      }
      return await this.#forceFinal({ ...parts, trajectory });
    } catch (error) {
      throw this.#failure(error);
    } finally {
      await parts.sandbox.dispose();
    }
  }

  /** One turn: ask the root model, run its code, and decide whether the run is over. */
  async #takeTurn(turn: RunParts & { index: number; notes: string[] }): Promise<TurnOutcome> {
    const { index, signal } = turn;
    const started = performance.now();
    turn.sandbox.throwIfFailed();
    const { prompt, asked } = turn.conversation.nextTurn({ index, notes: turn.notes });
    const { reply, toolCalls } = await this.#askRoot(prompt, turn);
    const record = (fields: Pick<IterationRecord, 'codeBlocks' | 'finalAnswer'> & Partial<IterationRecord>): IterationRecord =>
      ({ index, prompt: prompt.messages, response: reply, durationMs: performance.now() - started, ...fields });
    if (toolCalls.length > 0 && this.#placement.callerTools) {
      const calls = toolCalls.map((call) => ({ ...call, id: this.#nextCallerCallId() }));
      return { type: 'caller-tools', reply, calls, asked, record: record({ codeBlocks: [], finalAnswer: null, callerToolCalls: calls }) };
    }
    const parsed = parseReply(reply);
    // A reply with code or a text FINAL needs the sandbox: one that failed to start fails the run here.
    if (parsed.blocks.length > 0 || parsed.textFinal) await turn.sandbox.ready;
    const codeBlocks = await turn.blocks.run({ sandbox: turn.sandbox.ready, blocks: parsed.blocks, iteration: index, signal });
    const found = await turn.answers.ofTurn({ parsed, codeBlocks, codeHasRun: turn.blocks.codeHasRun, sandbox: turn.sandbox.ready, signal });
    const done = record({ codeBlocks, finalAnswer: found.answer ?? null, ...(found.answer === undefined && found.rejected && { rejectedFinal: found.rejected }) });
    if (found.answer !== undefined) return { type: 'final', reply, answer: found.answer, output: found.output, source: found.source, record: done };
    const notes = found.notes;
    if (parsed.blocks.length === 0 && !parsed.textFinal) notes.push(message(reply.trim() === '' ? 'empty-reply' : 'no-code'));
    const codeFailed = codeBlocks.some((block) => block.result.error);
    return { type: 'continue', reply, record: done, outputs: turn.conversation.blockOutputs(codeBlocks), notes, codeFailed };
  }

  /**
   * One root-model call; the caller's tools, if any, are offered as native tools. Every root request
   * (turns, compaction, the forced answer) goes through here.
   */
  async #askRoot(
    prompt: RootPrompt,
    { conversation, signal, responseFormat }: Pick<RunParts, 'conversation' | 'signal'> & { responseFormat?: Record<string, unknown> | undefined },
  ): Promise<{ reply: string; toolCalls: ToolCall[] }> {
    const callerTools = this.#placement.callerTools;
    const response = await this.#gateway.with({ purpose: 'root' }).chat({
      model: this.rootModel,
      messages: prompt.sent,
      signal,
      ...(callerTools && callerTools.specs.length > 0 && { tools: callerTools.specs, ...(callerTools.toolChoice && { toolChoice: callerTools.toolChoice }) }),
      ...(responseFormat && { responseFormat }),
    });
    const reply = response.content ?? '';
    conversation.measured(prompt, response.usage.inputTokens);
    this.#bestPartial = partialAnswerOf(reply) ?? this.#bestPartial;
    signal.throwIfAborted(); // a limit crossed by this very call
    return { reply, toolCalls: response.toolCalls };
  }

  /**
   * Out of turns: one more call asks for the best answer from everything so far (with an output
   * schema: JSON matching it, through the provider's structured output when the schema has a strict
   * form). The reply is read like any other (see FinalAnswerResolver.ofForcedTurn); a reply that
   * offers only code is no answer, and the run ends at its limit; an answer that does not match
   * the schema ends it with `invalid_output`.
   */
  async #forceFinal(parts: RunParts & { trajectory: IterationRecord[] }): Promise<RunOutcome> {
    const { conversation, sandbox, blocks, signal, trajectory, output } = parts;
    const { maxIterations } = this.shared.settings;
    const index = maxIterations + 1;
    const started = performance.now();
    this.emit({ type: 'iteration-start', iteration: index, maxIterations });
    const prompt = conversation.lastTurn(output?.text);
    const { reply } = await this.#askRoot(prompt, { ...parts, responseFormat: structuredOutputFormat(output) });
    const parsed = parseReply(reply);
    const codeBlocks = await blocks.run({ sandbox: sandbox.ready, blocks: parsed.blocks, iteration: index, signal });
    const found = await parts.answers.ofForcedTurn({ parsed, reply, codeBlocks, sandbox: sandbox.ready, signal });
    const rejected = found?.answer === undefined ? found?.rejected : undefined;
    const record: IterationRecord = { index, prompt: prompt.messages, response: reply, codeBlocks, finalAnswer: found?.answer ?? null, durationMs: performance.now() - started, ...(rejected && { rejectedFinal: rejected }) };
    trajectory.push(record);
    await this.#reportIteration(record);
    if (found === undefined) {
      throw new RunLimitError('max_iterations', `The run used all ${maxIterations} iterations without a final answer, and its last reply offered only code.`);
    }
    if (found.answer === undefined) {
      this.#bestPartial = found.rejected.answer;
      throw new RunFailedError('invalid_output', `The final answer does not match the output schema: ${found.rejected.problems.join('; ')}`);
    }
    this.emit({ type: 'final', answer: found.answer, source: 'forced' });
    conversation.add({ role: 'assistant', content: reply });
    return { response: found.answer, ...(output && { output: found.output }), forced: true, iterations: maxIterations, trajectory, messages: [...conversation.messages] };
  }

  /** Starts the run's sandbox and conversation, and what its blocks need. */
  #start(input: RunInput): RunParts {
    const { settings, budget } = this.shared;
    const { parentSignal, session, callerTools } = this.#placement;
    const signal = parentSignal ? AbortSignal.any([budget.signal, parentSignal]) : budget.signal;
    const { output } = input;
    const services = new BlockServices({ run: this, gateway: this.#gateway, callerTools, nextCallerCallId: this.#nextCallerCallId, signal, output });
    const sandbox = new RunSandbox({ context: input.context, session, settings, services, signal });
    const conversation: RootConversation = new RootConversation({
      systemPrompt: settings.systemPrompt ?? this.#systemPrompt(output),
      firstMessage: contextMessage({ context: input.context, depth: this.depth, names: sandbox.names }),
      query: input.query,
      rootModel: this.rootModel,
      contextWindow: contextWindowOf(this.rootModel, settings.contextWindow),
      compaction: settings.compaction,
      ask: async (prompt, askSignal): Promise<string> => (await this.#askRoot(prompt, { conversation, signal: askSignal })).reply,
      loadHistory: (messages, loadSignal) => sandbox.loadHistory(messages, loadSignal),
      onCompaction: (record) => {
        this.#placement.logger?.compaction(record);
        this.emit({ type: 'compaction', ...record });
      },
    });
    const blocks = new CodeBlockRunner({ services, emit: (event) => this.emit(event) });
    return { conversation, sandbox, blocks, answers: new FinalAnswerResolver({ maxIterations: settings.maxIterations, output }), output, signal };
  }

  async #reportIteration(record: IterationRecord): Promise<void> {
    this.#placement.logger?.iteration(record);
    await this.#placement.onIteration?.(record, record.index);
    this.emit({ type: 'iteration-end', iteration: record.index, record });
  }

  #checkErrorStreak(errorStreak: number): void {
    const { maxErrors } = this.shared.settings;
    if (maxErrors !== undefined && errorStreak >= maxErrors) {
      throw new RunLimitError('max_errors', `Error limit reached: ${errorStreak} iterations in a row ended with an error in their code.`);
    }
  }

  #systemPrompt(output: OutputSchema | undefined): string {
    const { settings } = this.shared;
    const { outputLimitChars, blockTimeoutMs } = settings.sandbox;
    const callerTools = this.#placement.callerTools?.specs ?? [];
    const canRecurse = this.depth + 1 < settings.maxDepth;
    return systemPrompt({ outputLimitChars, blockTimeoutMs, depth: this.depth, canRecurse, tools: settings.tools, callerTools, outputSchema: output?.text });
  }

  createChild(model: string, signal: AbortSignal): Run {
    return new Run({ shared: this.shared, gateway: this.#gateway.child(), depth: this.depth + 1, rootModel: model, placement: { parentRunId: this.runId, parentSignal: signal } });
  }

  emit(event: RunEventInput): void {
    this.shared.emit({ ...event, runId: this.runId, depth: this.depth } as RlmEvent);
  }

  /** The error a failed run ends with: when the tree was stopped (a limit, the caller), its reason. */
  #failure(error: unknown): unknown {
    return this.shared.budget.signal.aborted ? this.shared.budget.signal.reason : error;
  }
}

/** OpenAI's structured output for the forced answer, when the schema has a strict form; else it is asked for in the prompt only. */
function structuredOutputFormat(output: OutputSchema | undefined): Record<string, unknown> | undefined {
  if (!output?.strictSchema) return undefined;
  return { type: 'json_schema', json_schema: { name: 'final_answer', schema: output.strictSchema, strict: true } };
}
