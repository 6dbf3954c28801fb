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
import { RunLimitError } from './limits.js';
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
  readonly #finalAnswers: FinalAnswerResolver;
  readonly #nextCallerCallId = callerCallIds(this.runId);
  #bestPartial: string | undefined;

  constructor(options: RunOptions) {
    this.shared = options.shared;
    this.depth = options.depth;
    this.rootModel = options.rootModel;
    this.#placement = options.placement ?? {};
    this.#gateway = options.gateway.with({ onEvent: (event) => this.emit(event) });
    this.#finalAnswers = new FinalAnswerResolver({ maxIterations: options.shared.settings.maxIterations });
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
            return { response: outcome.answer, forced: false, iterations: index, trajectory, messages: [...conversation.messages] };
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
    const found = await this.#finalAnswers.ofTurn({ parsed, codeBlocks, codeHasRun: turn.blocks.codeHasRun, sandbox: turn.sandbox.ready, signal });
    const done = record({ codeBlocks, finalAnswer: found.answer ?? null });
    if (found.answer !== undefined) return { type: 'final', reply, answer: found.answer, source: found.source, record: done };
    const notes = found.notes;
    if (parsed.blocks.length === 0 && !parsed.textFinal) notes.push(message(reply.trim() === '' ? 'empty-reply' : 'no-code'));
    const codeFailed = codeBlocks.some((block) => block.result.error);
    return { type: 'continue', reply, record: done, outputs: turn.conversation.blockOutputs(codeBlocks), notes, codeFailed };
  }

  /**
   * One root-model call; the caller's tools, if any, are offered as native tools. Every root request
   * (turns, compaction, the forced answer) goes through here.
   */
  async #askRoot(prompt: RootPrompt, { conversation, signal }: Pick<RunParts, 'conversation' | 'signal'>): Promise<{ reply: string; toolCalls: ToolCall[] }> {
    const callerTools = this.#placement.callerTools;
    const response = await this.#gateway.with({ purpose: 'root' }).chat({
      model: this.rootModel,
      messages: prompt.sent,
      signal,
      ...(callerTools && callerTools.specs.length > 0 && { tools: callerTools.specs, ...(callerTools.toolChoice && { toolChoice: callerTools.toolChoice }) }),
    });
    const reply = response.content ?? '';
    conversation.measured(prompt, response.usage.inputTokens);
    this.#bestPartial = partialAnswerOf(reply) ?? this.#bestPartial;
    signal.throwIfAborted(); // a limit crossed by this very call
    return { reply, toolCalls: response.toolCalls };
  }

  /**
   * Out of turns: one more call asks for the best answer from everything so far. The reply is read
   * like any other (see FinalAnswerResolver.ofForcedTurn); a reply that offers only code is no
   * answer, and the run ends at its limit.
   */
  async #forceFinal(parts: RunParts & { trajectory: IterationRecord[] }): Promise<RunOutcome> {
    const { conversation, sandbox, blocks, signal, trajectory } = parts;
    const { maxIterations } = this.shared.settings;
    const index = maxIterations + 1;
    const started = performance.now();
    this.emit({ type: 'iteration-start', iteration: index, maxIterations });
    const prompt = conversation.lastTurn();
    const { reply } = await this.#askRoot(prompt, parts);
    const parsed = parseReply(reply);
    const codeBlocks = await blocks.run({ sandbox: sandbox.ready, blocks: parsed.blocks, iteration: index, signal });
    const answer = await this.#finalAnswers.ofForcedTurn({ parsed, codeBlocks, sandbox: sandbox.ready, signal });
    const record: IterationRecord = { index, prompt: prompt.messages, response: reply, codeBlocks, finalAnswer: answer ?? null, durationMs: performance.now() - started };
    trajectory.push(record);
    await this.#reportIteration(record);
    if (answer === undefined) {
      throw new RunLimitError('max_iterations', `The run used all ${maxIterations} iterations without a final answer, and its last reply offered only code.`);
    }
    this.emit({ type: 'final', answer, source: 'forced' });
    conversation.add({ role: 'assistant', content: reply });
    return { response: answer, forced: true, iterations: maxIterations, trajectory, messages: [...conversation.messages] };
  }

  /** Starts the run's sandbox and conversation, and what its blocks need. */
  #start(input: RunInput): RunParts {
    const { settings, budget } = this.shared;
    const { parentSignal, session, callerTools } = this.#placement;
    const signal = parentSignal ? AbortSignal.any([budget.signal, parentSignal]) : budget.signal;
    const services = new BlockServices({ run: this, gateway: this.#gateway, callerTools, nextCallerCallId: this.#nextCallerCallId, signal });
    const sandbox = new RunSandbox({ context: input.context, session, settings, services, signal });
    const conversation: RootConversation = new RootConversation({
      systemPrompt: settings.systemPrompt ?? this.#systemPrompt(),
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
    return { conversation, sandbox, blocks: new CodeBlockRunner({ services, emit: (event) => this.emit(event) }), signal };
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

  #systemPrompt(): string {
    const { settings } = this.shared;
    const { outputLimitChars, blockTimeoutMs } = settings.sandbox;
    const callerTools = this.#placement.callerTools?.specs ?? [];
    return systemPrompt({ outputLimitChars, blockTimeoutMs, depth: this.depth, canRecurse: this.depth + 1 < settings.maxDepth, tools: settings.tools, callerTools });
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
