import { randomUUID } from 'node:crypto';
import type { ModelCallEvent, ModelGateway } from '../lm/gateway.js';
import type { KeyedQueues } from '../lm/scheduler.js';
import { ToolError } from '../errors.js';
import { toolOutputText } from '../lm/tool-text.js';
import { unknownToolMessage } from '../lm/tool-arguments.js';
import { toolCallMessage, type ChatMessage, type ChatRequest, type ChatResponse, type ToolCall } from '../lm/types.js';
import { ConversationMeter, contextWindowOf, estimateTokens } from './compaction.js';
import { CallerToolBatch, callerToolValue, type CallerTools } from './caller-tools.js';
import type { HostCall } from '../sandbox/protocol.js';
import { Sandbox, type ExecuteResult, type SandboxOptions } from '../sandbox/sandbox.js';
import { ToolExecutor } from '../tools/executor.js';
import type { ToolRegistry } from '../tools/registry.js';
import { runChildren, type ParentRun } from './child-runs.js';
import type { CodeBlockRecord, IterationRecord, RlmEvent } from './events.js';
import { routeHostCall, type BlockScope } from './host-calls.js';
import { RunLimitError, type TreeBudget } from './limits.js';
import { LlmQueries } from './llm-queries.js';
import { parseReply, partialAnswerOf, type CodeBlock, type ParsedReply } from './parsing.js';
import { alternateRoles } from './alternation.js';
import { blockOutputMessage, contextMessage, forceFinalPrompt, message, systemPrompt, turnPrompt } from './prompts.js';
import type { TrajectoryLogger } from './trajectory.js';
import { transpileTypeScript } from '../typescript.js';

/** Settings every run of a tree shares (resolved from the RLM options). */
export interface RunSettings {
  rootModel: string;
  subModel: string;
  maxIterations: number;
  maxDepth: number;
  maxErrors: number | undefined;
  maxToolIterations: number;
  maxConcurrentChildren: number;
  systemPrompt: string | undefined;
  sandbox: Omit<SandboxOptions, 'onHostCall'>;
  setupCode: string[];
  /** Host tools for model code (shared by child runs). */
  tools: ToolRegistry;
  /** What went wrong while preparing, without stopping runs (an MCP server that did not start). */
  warnings?: string[];
  /** Tokens the root model of each run can read; undefined: from the table of known models. */
  contextWindow: number | undefined;
  /** When to compact a root conversation, as a share of the window; false: never (the run ends instead). */
  compaction: { thresholdPct: number } | false;
}

/** What every run of one tree shares: settings, limits, the event sink and the child queues. */
export interface RunTree {
  settings: RunSettings;
  budget: TreeBudget;
  emit: (event: RlmEvent) => void;
  onRequest: ((request: Omit<ChatRequest, 'signal'>, response: ChatResponse | undefined) => void) | undefined;
  /** Child runs waiting or running, per depth, so a parent waiting on its children never holds a slot they need. */
  childQueues: KeyedQueues<number>;
}

export interface RunInput {
  context: unknown;
  query: string | undefined;
}

export interface RunOutcome {
  response: string;
  forced: boolean;
  iterations: number;
  trajectory: IterationRecord[];
  /** The root model's conversation, for sessions (history_N). */
  messages: ChatMessage[];
}

/** Session state a multi-turn conversation keeps between completions. */
export interface SessionState {
  sandbox: Sandbox | undefined;
  contexts: number;
  histories: number;
  /** The root conversation of the last completion, loaded as history_N by the next one. */
  lastMessages?: ChatMessage[];
}

/** Where a run sits: its parent (for a child run), its session, and who watches its iterations. */
export interface RunPlacement {
  parentRunId?: string;
  logger?: TrajectoryLogger | undefined;
  onIteration?: ((iteration: IterationRecord, index: number) => unknown) | undefined;
  session?: SessionState;
  /** For a child run: the parent block's signal, so the child stops when that block does. */
  parentSignal?: AbortSignal;
  /** Tools of the caller, handed back for it to run (the root run of a request to `rlm serve`). */
  callerTools?: CallerTools | undefined;
}

/** An event as a run reports it; the tree adds the run's id and depth. */
export type RunEventInput = DistributiveOmit<RlmEvent, 'runId' | 'depth'>;

/** How one root-model turn ended: the run loop switches on `type`. */
type TurnOutcome =
  | { type: 'final'; reply: string; answer: string; source: 'code' | 'text'; record: IterationRecord }
  | { type: 'continue'; reply: string; record: IterationRecord; outputs: ChatMessage[]; notes: string[]; codeFailed: boolean }
  | { type: 'caller-tools'; reply: string; record: IterationRecord; calls: ToolCall[]; asked: ChatMessage[] };

interface TurnInput {
  index: number;
  conversation: ChatMessage[];
  notes: string[];
  query: string | undefined;
  signal: AbortSignal;
  sandboxReady: Promise<Sandbox>;
}

/** Room kept for the message each turn adds after the conversation (turn number, query, notes). */
const TURN_PROMPT_ALLOWANCE = 200;
/** The most of the window one block's output may take; a longer output is cut to it. */
const OUTPUT_SHARE_OF_WINDOW = 0.5;

/**
 * One RLM run: the loop of root-model turns over one sandbox, at some depth of the run tree.
 */
export class Run implements ParentRun {
  readonly runId = randomUUID();
  private readonly gateway: ModelGateway;
  private readonly toolExecutor: ToolExecutor;
  private bestPartial: string | undefined;
  private codeHasRun = false;
  /** A FINAL before any code was refused once; the model that gives one again means it. */
  private codelessFinalRefused = false;
  private callerCalls = 0;
  private readonly meter = new ConversationMeter();
  /** Tokens this run's root model can read. */
  private readonly contextWindow: number;
  /** Every message the root conversation had before compactions replaced them (the sandbox's `history`). */
  private readonly history: ChatMessage[] = [];
  /** Where the turns start in the conversation: after the system prompt and the first message (and a summary). */
  private turnsStart = 2;
  /** Aborts when this run must stop (its tree's limits, its parent block); set when it starts. */
  private runSignal: AbortSignal | undefined;

  /** The best answer the run had so far, should it stop now (see partialAnswerOf). */
  get partialAnswer(): string | undefined {
    return this.bestPartial;
  }

  constructor(
    readonly tree: RunTree,
    gateway: ModelGateway,
    readonly depth: number,
    readonly rootModel: string,
    private readonly placement: RunPlacement = {},
  ) {
    this.gateway = gateway.with({ onEvent: (event) => this.emit(event) });
    this.toolExecutor = new ToolExecutor(tree.settings.tools);
    this.contextWindow = contextWindowOf(rootModel, tree.settings.contextWindow);
  }

  /** Runs turns until the root model gives a final answer, a limit stops the run, or turns run out. */
  async complete(input: RunInput): Promise<RunOutcome> {
    const { settings, budget } = this.tree;
    this.emit({ type: 'run-start', model: this.rootModel, parentRunId: this.placement.parentRunId, query: input.query, logPath: this.placement.logger?.path });
    const signal = this.placement.parentSignal ? AbortSignal.any([budget.signal, this.placement.parentSignal]) : budget.signal;
    this.runSignal = signal;
    const { sandboxReady, firstMessage } = this.startSandbox(input.context, signal);
    try {
      const conversation: ChatMessage[] = [
        { role: 'system', content: this.systemPrompt() },
        { role: 'user', content: firstMessage },
      ];
      const trajectory: IterationRecord[] = [];
      let notes: string[] = [];
      let errorStreak = 0;
      for (let index = 1; index <= settings.maxIterations; index++) {
        signal.throwIfAborted();
        this.emit({ type: 'iteration-start', iteration: index, maxIterations: settings.maxIterations });
        await this.fitWindow(conversation, input.query, signal, sandboxReady);
        const outcome = await this.takeTurn({ index, conversation, notes, query: input.query, signal, sandboxReady });
        trajectory.push(outcome.record);
        await this.reportIteration(outcome.record);
        switch (outcome.type) {
          case 'final':
            conversation.push({ role: 'assistant', content: outcome.reply });
            this.emit({ type: 'final', answer: outcome.answer, source: outcome.source });
            return { response: outcome.answer, forced: false, iterations: index, trajectory, messages: conversation };
          case 'continue':
            conversation.push({ role: 'assistant', content: outcome.reply });
            errorStreak = outcome.codeFailed ? errorStreak + 1 : 0;
            this.checkErrorStreak(errorStreak);
            conversation.push(...outcome.outputs);
            notes = outcome.notes;
            break;
          case 'caller-tools':
            // The turn prompt stays before the tool-call turn, so the model reads the results after
            // the question, and the next request can end with them (see alternateRoles).
            conversation.push(...outcome.asked);
            conversation.push(...(await this.callCallerTools(outcome.reply, outcome.calls, signal)));
            notes = [];
            break;
        }
      }
      return await this.forceFinal(conversation, trajectory, signal, sandboxReady);
    } catch (error) {
      throw this.failure(error);
    } finally {
      if (!this.placement.session) await sandboxReady.then((sandbox) => sandbox.dispose(), () => {});
    }
  }

  // ---- turns -------------------------------------------------------------------------------------

  /** One turn: ask the root model, run its code, and decide whether the run is over. */
  private async takeTurn(turn: TurnInput): Promise<TurnOutcome> {
    const started = performance.now();
    // After the caller's tool results the model speaks next, as in any tool-calling exchange: a
    // user message there would follow the user turn before the calls (see alternateRoles).
    const asked: ChatMessage[] = turn.conversation.at(-1)?.role === 'tool' ? [] : [{ role: 'user', content: turnPrompt(turn.index, turn.query, turn.notes) }];
    const prompt: ChatMessage[] = [...turn.conversation, ...asked];
    const { reply, toolCalls } = await this.askRoot(prompt, turn.signal);
    if (toolCalls.length > 0 && this.placement.callerTools) {
      const calls = toolCalls.map((call) => ({ ...call, id: this.nextCallerCallId() }));
      const record: IterationRecord = { index: turn.index, prompt, response: reply, codeBlocks: [], finalAnswer: null, durationMs: performance.now() - started, callerToolCalls: calls };
      return { type: 'caller-tools', reply, record, calls, asked };
    }
    const parsed = parseReply(reply);
    const sandbox = parsed.blocks.length > 0 || parsed.textFinal ? await turn.sandboxReady : undefined;
    const codeBlocks = await this.runBlocks(sandbox, parsed.blocks, turn.index, turn.signal);
    const codeFinal = codeBlocks.at(-1)?.result.final;
    const textFinal = codeFinal === undefined && parsed.textFinal ? await this.acceptTextFinal(sandbox!, parsed, turn.signal) : undefined;
    const answer = codeFinal ?? (textFinal && 'answer' in textFinal ? textFinal.answer : undefined);
    const record: IterationRecord = {
      index: turn.index,
      prompt,
      response: reply,
      codeBlocks,
      finalAnswer: answer ?? null,
      durationMs: performance.now() - started,
    };
    if (answer !== undefined) return { type: 'final', reply, answer, source: codeFinal !== undefined ? 'code' : 'text', record };
    const notes = textFinal && 'note' in textFinal ? [textFinal.note] : [];
    if (parsed.blocks.length === 0 && !parsed.textFinal) notes.push(message(reply.trim() === '' ? 'empty-reply' : 'no-code'));
    const outputs = codeBlocks.map((block): ChatMessage => ({ role: 'user', content: this.fitOutput(blockOutputMessage(block)) }));
    return { type: 'continue', reply, record, outputs, notes, codeFailed: codeBlocks.some((block) => block.result.error) };
  }

  /**
   * One root-model call; the caller's tools, if any, are offered as native tools. Every root request
   * (turns, compaction, the forced answer) goes through here, with roles alternating as strict chat
   * templates require.
   */
  private async askRoot(messages: ChatMessage[], signal: AbortSignal): Promise<{ reply: string; toolCalls: ToolCall[] }> {
    const callerTools = this.placement.callerTools;
    const response = await this.gateway.with({ purpose: 'root' }).chat({
      model: this.rootModel,
      messages: alternateRoles(messages),
      signal,
      ...(callerTools && callerTools.specs.length > 0 && { tools: callerTools.specs, ...(callerTools.toolChoice && { toolChoice: callerTools.toolChoice }) }),
    });
    const reply = response.content ?? '';
    this.meter.report(messages.slice(0, -1), response.usage.inputTokens);
    this.bestPartial = partialAnswerOf(reply) ?? this.bestPartial;
    signal.throwIfAborted(); // a limit crossed by this very call
    return { reply, toolCalls: response.toolCalls };
  }

  /**
   * The root model called tools of the caller: hand them back and wait for the results, then
   * continue the conversation with them. Calls to tools the caller does not have are answered here.
   */
  private async callCallerTools(reply: string, calls: ToolCall[], signal: AbortSignal): Promise<ChatMessage[]> {
    const callerTools = this.placement.callerTools!;
    const known = new Set(callerTools.specs.map((spec) => spec.function.name));
    const handedBack = calls.filter((call) => known.has(call.name));
    this.emit({ type: 'caller-tool-calls', calls: handedBack });
    const outputs = handedBack.length > 0 ? await callerTools.call(handedBack, signal) : [];
    signal.throwIfAborted();
    const outputById = new Map(handedBack.map((call, index) => [call.id, outputs[index] ?? '']));
    return [
      { role: 'assistant', content: reply || null, tool_calls: calls.map(toolCallMessage) },
      ...calls.map((call): ChatMessage => ({ role: 'tool', tool_call_id: call.id, content: outputById.get(call.id) ?? `Error: ${unknownToolMessage(call.name, known)}` })),
    ];
  }

  /** Ids the caller sees: unique in this run, whatever ids the upstream model chose. */
  private nextCallerCallId(): string {
    return `call_${this.runId.slice(0, 8)}_${++this.callerCalls}`;
  }

  /**
   * Keeps the conversation, as the next turn will send it, inside the root model's window: past the
   * threshold the root model summarizes and the summary replaces the turns (see compaction.ts);
   * with compaction off, a conversation that would overflow ends the run with `context_window`.
   */
  private async fitWindow(conversation: ChatMessage[], query: string | undefined, signal: AbortSignal, sandboxReady: Promise<Sandbox>): Promise<void> {
    const { compaction } = this.tree.settings;
    const window = this.contextWindow;
    const tokens = this.meter.measure(conversation) + TURN_PROMPT_ALLOWANCE;
    if (compaction && tokens >= (window * compaction.thresholdPct) / 100 && conversation.length > this.turnsStart) {
      await this.compact(conversation, tokens, query, signal, sandboxReady);
      return;
    }
    if (tokens > window) {
      throw new RunLimitError('context_window', `The root conversation (about ${tokens.toLocaleString('en-US')} tokens) no longer fits the context window of ${this.rootModel} (${window.toLocaleString('en-US')} tokens), and compaction is off.`);
    }
  }

  private async compact(conversation: ChatMessage[], tokensBefore: number, query: string | undefined, signal: AbortSignal, sandboxReady: Promise<Sandbox>): Promise<void> {
    const started = performance.now();
    const { reply: summary } = await this.askRoot([...conversation, { role: 'user', content: message('compact-request') }], signal);
    if (this.history.length === 0) this.history.push(...conversation.slice(0, 2));
    const replaced = conversation.slice(this.turnsStart);
    this.history.push(...replaced);
    await (await sandboxReady).setContext(this.history, 'history', { signal });
    const kept: ChatMessage[] = [
      conversation[0]!,
      conversation[1]!,
      { role: 'assistant', content: summary },
      { role: 'user', content: [message('compacted', { turns: String(replaced.length) }), query !== undefined ? message('query', { query }) : ''].filter(Boolean).join('\n\n') },
    ];
    conversation.splice(0, conversation.length, ...kept);
    this.turnsStart = kept.length;
    const tokensAfter = this.meter.measure(conversation) + TURN_PROMPT_ALLOWANCE;
    const record = { tokensBefore, tokensAfter, contextWindow: this.contextWindow, messagesReplaced: replaced.length, summary, durationMs: performance.now() - started };
    this.placement.logger?.compaction(record);
    this.emit({ type: 'compaction', ...record });
    if (tokensAfter > this.contextWindow) {
      throw new RunLimitError('context_window', `Even compacted, the root conversation (about ${tokensAfter.toLocaleString('en-US')} tokens) does not fit the context window of ${this.rootModel} (${this.contextWindow.toLocaleString('en-US')} tokens).`);
    }
  }

  /** A block output that alone would fill most of the window is cut, saying so. */
  private fitOutput(text: string): string {
    const allowed = this.contextWindow * OUTPUT_SHARE_OF_WINDOW;
    if (estimateTokens([{ role: 'user', content: text }]) <= allowed) return text;
    const shown = Math.floor(allowed * 3) - 200;
    return `${text.slice(0, shown)}\n${message('output-cut', { shown: shown.toLocaleString('en-US'), total: text.length.toLocaleString('en-US') })}`;
  }

  /**
   * Out of turns: one more call asks for the best answer from everything so far. The reply is read
   * like any other: FINAL(...) is unwrapped, FINAL_VAR(...) looked up, code run for its FINAL; what
   * remains is its prose. A reply that offers only code is no answer, and the run ends at its limit.
   */
  private async forceFinal(conversation: ChatMessage[], trajectory: IterationRecord[], signal: AbortSignal, sandboxReady: Promise<Sandbox>): Promise<RunOutcome> {
    const { maxIterations } = this.tree.settings;
    const started = performance.now();
    this.emit({ type: 'iteration-start', iteration: maxIterations + 1, maxIterations });
    const prompt: ChatMessage[] = [...conversation, { role: 'user', content: forceFinalPrompt() }];
    const { reply } = await this.askRoot(prompt, signal);
    const parsed = parseReply(reply);
    const codeBlocks = parsed.blocks.length > 0 ? await this.runBlocks(await sandboxReady, parsed.blocks, maxIterations + 1, signal) : [];
    const answer = codeBlocks.at(-1)?.result.final ?? (await this.forcedText(parsed, sandboxReady, signal));
    const record: IterationRecord = { index: maxIterations + 1, prompt, response: reply, codeBlocks, finalAnswer: answer ?? null, durationMs: performance.now() - started };
    trajectory.push(record);
    await this.reportIteration(record);
    if (answer === undefined) {
      throw new RunLimitError('max_iterations', `The run used all ${maxIterations} iterations without a final answer, and its last reply offered only code.`);
    }
    this.emit({ type: 'final', answer, source: 'forced' });
    conversation.push({ role: 'assistant', content: reply });
    return { response: answer, forced: true, iterations: maxIterations, trajectory, messages: conversation };
  }

  private async forcedText(parsed: ParsedReply, sandboxReady: Promise<Sandbox>, signal: AbortSignal): Promise<string | undefined> {
    const final = parsed.textFinal;
    if (final?.kind === 'FINAL') return final.value;
    if (final?.kind === 'FINAL_VAR') {
      const lookup = await (await sandboxReady).execute(`FINAL_VAR(${JSON.stringify(final.name)})`, { signal });
      if (lookup.final !== undefined) return lookup.final;
      // The reply's answer is a variable that holds none (missing, undefined, a promise): its text is
      // no answer either.
      const refusal = finalVarRefusal(lookup, final.name);
      // Its first sentence says why; the rest tells the model how to go on, which it no longer can.
      const reason = /^[\s\S]*?[.?!](?=\s|$)/.exec(refusal)?.[0] ?? refusal;
      throw new RunLimitError('max_iterations', `The run used all ${this.tree.settings.maxIterations} iterations, and the answer of its last reply was refused: ${reason}`);
    }
    return parsed.prose || undefined;
  }

  private async reportIteration(record: IterationRecord): Promise<void> {
    this.placement.logger?.iteration(record);
    await this.placement.onIteration?.(record, record.index);
    this.emit({ type: 'iteration-end', iteration: record.index, record });
  }

  private checkErrorStreak(errorStreak: number): void {
    const { maxErrors } = this.tree.settings;
    if (maxErrors !== undefined && errorStreak >= maxErrors) {
      throw new RunLimitError('max_errors', `Error limit reached: ${errorStreak} iterations in a row ended with an error in their code.`);
    }
  }

  // ---- code blocks -------------------------------------------------------------------------------

  /** Runs the reply's blocks in order, stopping after one that gives a final answer. */
  private async runBlocks(sandbox: Sandbox | undefined, blocks: CodeBlock[], iteration: number, signal: AbortSignal): Promise<CodeBlockRecord[]> {
    const records: CodeBlockRecord[] = [];
    for (const [index, block] of blocks.entries()) {
      const record = await this.runBlock(sandbox!, block, iteration, index, signal);
      records.push(record);
      if (record.result.final !== undefined) break;
    }
    return records;
  }

  private async runBlock(sandbox: Sandbox, block: CodeBlock, iteration: number, blockIndex: number, signal: AbortSignal): Promise<CodeBlockRecord> {
    this.emit({ type: 'code-start', iteration, block: blockIndex, code: block.code, language: block.language });
    const scope = this.newBlockScope();
    let result: ExecuteResult;
    const compiled = block.language === 'ts' ? transpile(block.code) : { code: block.code };
    if ('error' in compiled) {
      result = { stdout: '', error: compiled.error, durationMs: 0, variables: [], reset: false };
    } else {
      result = await sandbox.execute(compiled.code, { signal, scope });
      this.codeHasRun = true;
    }
    this.emit({ type: 'code-end', iteration, block: blockIndex, result });
    return { code: block.code, language: block.language, result, subcalls: scope.subcalls, toolCalls: scope.toolCalls };
  }

  /**
   * FINAL(...) written as text ends the run only when the reply has no code (the model has not seen
   * that code's output yet) and some code has already run in this run (the model has looked).
   */
  private async acceptTextFinal(sandbox: Sandbox, parsed: ParsedReply, signal: AbortSignal): Promise<{ answer: string } | { note: string }> {
    const final = parsed.textFinal!;
    if (parsed.blocks.length > 0) return { note: message('final-with-code') };
    if (!this.codeHasRun && !this.codelessFinalRefused) {
      // Models that answer before looking are usually guessing; one that says it again is sure.
      this.codelessFinalRefused = true;
      return { note: message('final-before-code') };
    }
    if (final.kind === 'FINAL') return { answer: final.value };
    const lookup = await sandbox.execute(`FINAL_VAR(${JSON.stringify(final.name)})`, { signal });
    if (lookup.final !== undefined) return { answer: lookup.final };
    return { note: finalVarRefusal(lookup, final.name) };
  }

  // ---- the sandbox and its host calls ------------------------------------------------------------

  /**
   * Starts (or, in a session, reuses) the sandbox and loads this run's inputs, while the root model
   * thinks about its first reply; blocks wait for it. In a session the first context is context_0
   * (also `context`), later ones context_1, ...; the previous completion's conversation arrives as
   * history_N, loaded under this run's limits.
   */
  private startSandbox(context: unknown, signal: AbortSignal): { sandboxReady: Promise<Sandbox>; firstMessage: string } {
    const session = this.placement.session;
    const contextIndex = session ? session.contexts++ : undefined;
    const history = session?.lastMessages && { name: `history_${session.histories++}`, messages: session.lastMessages };
    if (session) session.lastMessages = undefined;
    const sandboxReady = (async () => {
      const sandbox = session?.sandbox ?? (await this.createSandbox());
      if (session) session.sandbox = sandbox;
      try {
        if (history) await sandbox.setContext(history.messages, history.name, { signal });
        if (!contextIndex) await sandbox.setContext(context ?? '', 'context', { signal });
        if (contextIndex !== undefined) await sandbox.setContext(context ?? '', `context_${contextIndex}`, { signal });
      } catch (error) {
        if (!session) await sandbox.dispose();
        throw error;
      }
      return sandbox;
    })();
    sandboxReady.catch(() => {}); // awaited by the first block; a failure surfaces there
    const placement = { depth: this.depth, histories: session?.histories ?? 0, ...(contextIndex !== undefined && { contextIndex }) };
    return { sandboxReady, firstMessage: contextMessage(context, placement) };
  }

  /**
   * The run's sandbox. Host tools are synchronous in it; the caller's tools (which shadow host tools
   * of the same name) are asynchronous, collected per block and handed back when the block waits.
   */
  private async createSandbox(): Promise<Sandbox> {
    const { settings } = this.tree;
    const canRecurse = this.depth + 1 < settings.maxDepth;
    const callerSpecs = this.placement.callerTools?.specs ?? [];
    const callerNames = new Set(callerSpecs.map((spec) => spec.function.name));
    const specs = [...settings.tools.definitions().filter((spec) => !callerNames.has(spec.function.name)), ...callerSpecs];
    const callTool = (call: ToolHostCall, signal: AbortSignal, scope: BlockScope) =>
      callerNames.has(call.name) ? this.callCallerTool(call, scope) : this.callTool(call, signal, scope);
    const services = {
      ...(canRecurse && { runChildren: (call: ChildCall, signal: AbortSignal, scope: BlockScope) => runChildren(this, call, signal, scope.subcalls) }),
      ...(specs.length > 0 && { callTool }),
    };
    const sandbox = await Sandbox.create({
      ...settings.sandbox,
      onHostCall: (call, { signal, scope }) => routeHostCall(call, signal, (scope as BlockScope | undefined) ?? this.newBlockScope(), services),
      onBlockWaiting: ({ scope }) => (scope as BlockScope | undefined)?.callerBatch?.flush(this.runSignal ?? this.tree.budget.signal),
    });
    try {
      if (specs.length > 0) await sandbox.setTools(specs, { asyncTools: [...callerNames] });
      for (const code of settings.setupCode) await sandbox.addSetupCode(code);
    } catch (error) {
      await sandbox.dispose();
      throw error;
    }
    return sandbox;
  }

  /** Sub-calls made through this scope are reported as events and recorded on its block. */
  private newBlockScope(): BlockScope {
    const callerTools = this.placement.callerTools;
    const scope: Omit<BlockScope, 'queries'> = {
      subcalls: [],
      toolCalls: [],
      ...(callerTools && { callerBatch: new CallerToolBatch(callerTools, () => this.nextCallerCallId(), (calls) => this.emit({ type: 'caller-tool-calls', calls })) }),
    };
    const gateway = this.gateway.with({ purpose: 'sub', onEvent: (event) => this.recordSubcall(event, scope) });
    const queries = new LlmQueries({
      gateway,
      defaultModel: this.tree.settings.subModel,
      maxToolIterations: this.tree.settings.maxToolIterations,
      remainingCalls: () => this.tree.budget.remainingCalls(),
    });
    return { ...scope, queries };
  }

  private recordSubcall(event: ModelCallEvent, scope: Pick<BlockScope, 'subcalls'>): void {
    this.emit(event);
    if (event.type !== 'llm-call-end') return;
    this.tree.onRequest?.(event.request, event.response);
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

  /** A caller's tool called from model code: waits in the block's batch until the block waits. */
  private async callCallerTool(call: ToolHostCall, scope: BlockScope): Promise<unknown> {
    return callerToolValue(await scope.callerBatch!.add(call.name, call.arguments));
  }

  /** A host tool called from model code; a failed call becomes an error the code can catch. */
  private async callTool(call: ToolHostCall, signal: AbortSignal, scope: BlockScope): Promise<unknown> {
    const callId = randomUUID();
    this.emit({ type: 'tool-call-start', callId, toolName: call.name, arguments: call.arguments });
    const result = await this.toolExecutor.executeOne({ callId, name: call.name, arguments: call.arguments }, { signal, invocationId: this.runId });
    const outcome = result.success ? { result: result.result } : { error: result.error };
    scope.toolCalls.push({ name: result.toolName, callId, success: result.success, ...outcome, durationMs: result.durationMs });
    this.emit({
      type: 'tool-call-end',
      callId,
      toolName: result.toolName,
      durationMs: result.durationMs,
      ...(result.success ? { result: toolOutputText(result.result, JSON.stringify) } : { error: result.error }),
    });
    if (!result.success) throw new ToolError(result.error ?? `${call.name} failed`);
    return result.result;
  }

  // ---- children, events and errors ---------------------------------------------------------------

  createChild(model: string, signal: AbortSignal): Run {
    return new Run(this.tree, this.gateway.child(), this.depth + 1, model, { parentRunId: this.runId, parentSignal: signal });
  }

  emit(event: RunEventInput): void {
    this.tree.emit({ ...event, runId: this.runId, depth: this.depth } as RlmEvent);
  }

  private systemPrompt(): string {
    const { settings } = this.tree;
    if (settings.systemPrompt !== undefined) return settings.systemPrompt;
    return systemPrompt({
      outputLimitChars: settings.sandbox.outputLimitChars,
      blockTimeoutMs: settings.sandbox.blockTimeoutMs,
      depth: this.depth,
      canRecurse: this.depth + 1 < settings.maxDepth,
      tools: settings.tools,
      callerTools: this.placement.callerTools?.specs ?? [],
    });
  }

  /** The error a failed run ends with: when the tree was stopped (a limit, the caller), its reason. */
  private failure(error: unknown): unknown {
    return this.tree.budget.signal.aborted ? this.tree.budget.signal.reason : error;
  }
}

type ChildCall = Extract<HostCall, { kind: 'rlm_query' | 'rlm_query_batched' }>;
type ToolHostCall = Extract<HostCall, { kind: 'tool_call' }>;
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

function transpile(code: string): { code: string } | { error: { name: string; message: string; stack: string } } {
  try {
    return { code: transpileTypeScript(code) };
  } catch (error) {
    const { message: text } = error as Error;
    return { error: { name: 'SyntaxError', message: text, stack: `SyntaxError: ${text}` } };
  }
}

/** Why a text FINAL_VAR(name) gave no answer, as the sandbox's lookup of it said. */
function finalVarRefusal(lookup: ExecuteResult, name: string): string {
  return lookup.stdout.trim() || lookup.error?.message || message('final-var-missing', { name });
}
