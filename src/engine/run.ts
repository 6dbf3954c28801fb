import { randomUUID } from 'node:crypto';
import PQueue from 'p-queue';
import type { ModelGateway, ModelCallEvent } from '../lm/gateway.js';
import type { ChatMessage, ChatRequest, ChatResponse } from '../lm/types.js';
import type { HostCall } from '../sandbox/protocol.js';
import { Sandbox, type ExecuteResult, type SandboxOptions } from '../sandbox/sandbox.js';
import { DEFAULTS } from '../defaults.js';
import { toolOutputText } from '../lm/tool-text.js';
import { ToolExecutor } from '../tools/executor.js';
import type { ToolRegistry } from '../tools/registry.js';
import type { CodeBlockRecord, IterationRecord, RlmEvent, SubcallRecord, ToolCallRecord } from './events.js';
import { routeHostCalls } from './host-calls.js';
import { RunLimitError, type TreeBudget } from './limits.js';
import { itemResult, LlmQueries } from './llm-queries.js';
import { parseReply, type CodeBlock } from './parsing.js';
import { describeContext, promptTemplates, render } from './prompts.js';
import type { TrajectoryLogger } from './trajectory.js';
import { transpileTypeScript } from './typescript.js';

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
}

/** What every run of one tree shares: settings, limits, the event sink and the child queues. */
export interface RunTree {
  settings: RunSettings;
  budget: TreeBudget;
  emit: (event: RlmEvent) => void;
  onRequest: ((request: Omit<ChatRequest, 'signal'>, response: ChatResponse | undefined) => void) | undefined;
  /** Per depth, so a parent waiting on its children never holds a slot they need. */
  childQueues: Map<number, PQueue>;
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
  /** The root conversation of the last completion, loaded as history_N afterwards. */
  lastMessages?: ChatMessage[];
}

/**
 * One RLM run: the loop of root-model turns over one sandbox, at some depth of the run tree.
 */
export class Run {
  readonly runId = randomUUID();
  private readonly gateway: ModelGateway;
  private bestPartial: string | undefined;
  private currentSubcalls: SubcallRecord[] = [];
  private currentToolCalls: ToolCallRecord[] = [];
  private readonly toolExecutor: ToolExecutor;
  private codeHasRun = false;

  constructor(
    private readonly tree: RunTree,
    gateway: ModelGateway,
    private readonly depth: number,
    private readonly rootModel: string,
    private readonly hooks: {
      parentRunId?: string;
      logger?: TrajectoryLogger | undefined;
      onIteration?: ((iteration: IterationRecord, index: number) => unknown) | undefined;
      session?: SessionState;
      /** For a child run: the parent block's signal, so the child stops when that block does. */
      parentSignal?: AbortSignal;
    } = {},
  ) {
    this.gateway = gateway.with({ onEvent: (event) => this.onModelCall(event) });
    this.toolExecutor = new ToolExecutor(tree.settings.tools, {
      onToolStart: (toolName, callId, args) => this.emit({ type: 'tool-call-start', callId, toolName, arguments: args }),
      onToolEnd: (result) => {
        this.currentToolCalls.push({
          name: result.toolName,
          callId: result.callId,
          success: result.success,
          ...(result.success ? { result: result.result } : { error: result.error }),
          durationMs: result.durationMs,
        });
        this.emit({
          type: 'tool-call-end',
          callId: result.callId,
          toolName: result.toolName,
          durationMs: result.durationMs,
          ...(result.success ? { result: toolOutputText(result.result, JSON.stringify) } : { error: result.error }),
        });
      },
    });
  }

  async execute(input: RunInput): Promise<RunOutcome> {
    const { settings, budget } = this.tree;
    this.emit({ type: 'run-start', model: this.rootModel, parentRunId: this.hooks.parentRunId, query: input.query });
    const signal = this.hooks.parentSignal ? AbortSignal.any([budget.signal, this.hooks.parentSignal]) : budget.signal;
    const rootCalls = this.gateway.with({ purpose: 'root' });
    const session = this.hooks.session;
    // The sandbox starts while the root model thinks about its first reply; blocks wait for it.
    // In a session the first context is context_0 (also `context`), later ones context_1, ...; the
    // previous completion's conversation arrives as history_N, loaded under this run's limits.
    const contextIndex = session ? session.contexts++ : undefined;
    const history = session?.lastMessages && { index: session.histories++, messages: session.lastMessages };
    if (session) session.lastMessages = undefined;
    const sandboxReady = this.prepareSandbox({ context: input.context, contextIndex, history }, session, signal);
    sandboxReady.catch(() => {}); // awaited below; a failure surfaces there
    try {
      const messages: ChatMessage[] = [
        { role: 'system', content: this.systemPrompt() },
        { role: 'user', content: this.contextMessage(input.context, contextIndex, session) },
      ];
      const trajectory: IterationRecord[] = [];
      let consecutiveErrors = 0;
      let notes: string[] = [];

      for (let index = 1; index <= settings.maxIterations; index++) {
        signal.throwIfAborted();
        this.emit({ type: 'iteration-start', iteration: index, maxIterations: settings.maxIterations });
        const started = performance.now();
        const prompt: ChatMessage[] = [...messages, { role: 'user', content: this.turnPrompt(index, input.query, notes) }];
        notes = [];
        const reply = (await rootCalls.chat({ model: this.rootModel, messages: prompt, signal })).content ?? '';
        if (reply.trim()) this.bestPartial = reply;
        signal.throwIfAborted(); // a limit crossed by this very call

        const parsed = parseReply(reply);
        const codeBlocks: CodeBlockRecord[] = [];
        let final: { answer: string; source: 'code' | 'text' } | undefined;
        const sandbox = parsed.blocks.length > 0 || parsed.textFinal ? await sandboxReady : undefined;
        for (const [blockIndex, block] of parsed.blocks.entries()) {
          const record = await this.runBlock(sandbox!, block, index, blockIndex, signal);
          codeBlocks.push(record);
          if (record.result.final !== undefined) {
            final = { answer: record.result.final, source: 'code' };
            break;
          }
        }
        if (!final && parsed.textFinal) {
          const accepted = await this.acceptTextFinal(sandbox!, parsed, signal);
          if ('answer' in accepted) final = { answer: accepted.answer, source: 'text' };
          else notes.push(accepted.note);
        }
        if (parsed.blocks.length === 0 && !parsed.textFinal) {
          notes.push(
            reply.trim() === ''
              ? 'Your last reply was empty.'
              : 'Your last reply had no ```repl block and no FINAL(...), so nothing ran.',
          );
        }

        const record: IterationRecord = {
          index,
          prompt,
          response: reply,
          codeBlocks,
          finalAnswer: final?.answer ?? null,
          durationMs: performance.now() - started,
        };
        trajectory.push(record);
        this.hooks.logger?.iteration(record);
        await this.hooks.onIteration?.(record, index);
        this.emit({ type: 'iteration-end', iteration: index, record });

        if (final) {
          this.emit({ type: 'final', answer: final.answer, source: final.source });
          messages.push({ role: 'assistant', content: reply });
          return { response: final.answer, forced: false, iterations: index, trajectory, messages };
        }

        consecutiveErrors = codeBlocks.some((block) => block.result.error) ? consecutiveErrors + 1 : 0;
        if (settings.maxErrors !== undefined && consecutiveErrors >= settings.maxErrors) {
          throw new RunLimitError('max_errors', `Error limit reached: ${consecutiveErrors} iterations in a row ended with an error in their code.`);
        }
        messages.push({ role: 'assistant', content: reply }, ...codeBlocks.map((block) => this.outputMessage(block)));
      }

      // Out of turns: one more call asks for the best answer from everything so far.
      const started = performance.now();
      const prompt: ChatMessage[] = [...messages, { role: 'user', content: promptTemplates().forceFinal }];
      const answer = (await rootCalls.chat({ model: this.rootModel, messages: prompt, signal })).content ?? '';
      const record: IterationRecord = {
        index: settings.maxIterations + 1,
        prompt,
        response: answer,
        codeBlocks: [],
        finalAnswer: answer,
        durationMs: performance.now() - started,
      };
      trajectory.push(record);
      this.hooks.logger?.iteration(record);
      this.emit({ type: 'final', answer, source: 'forced' });
      messages.push({ role: 'assistant', content: answer });
      return { response: answer, forced: true, iterations: settings.maxIterations, trajectory, messages };
    } catch (error) {
      throw this.explain(error);
    } finally {
      if (!session) await sandboxReady.then((sandbox) => sandbox.dispose(), () => {});
    }
  }

  /** Creates (or reuses, in a session) the sandbox and loads the context (and session history) into it. */
  private async prepareSandbox(
    inputs: { context: unknown; contextIndex: number | undefined; history: { index: number; messages: ChatMessage[] } | undefined },
    session: SessionState | undefined,
    signal: AbortSignal,
  ): Promise<Sandbox> {
    const sandbox = session?.sandbox ?? (await this.createSandbox());
    if (session) session.sandbox = sandbox;
    const { context, contextIndex, history } = inputs;
    try {
      if (history) await sandbox.setContext(history.messages, `history_${history.index}`, { signal });
      if (!contextIndex) await sandbox.setContext(context ?? '', 'context', { signal });
      if (contextIndex !== undefined) await sandbox.setContext(context ?? '', `context_${contextIndex}`, { signal });
    } catch (error) {
      if (!session) await sandbox.dispose();
      throw error;
    }
    return sandbox;
  }

  // ---- sandbox -----------------------------------------------------------------------------------

  private async createSandbox(): Promise<Sandbox> {
    const queries = new LlmQueries({
      gateway: this.gateway.with({ purpose: 'sub' }),
      defaultModel: this.tree.settings.subModel,
      maxToolIterations: this.tree.settings.maxToolIterations,
      remainingCalls: () => this.tree.budget.remainingCalls(),
    });
    const sandbox = await Sandbox.create({
      ...this.tree.settings.sandbox,
      onHostCall: routeHostCalls({
        queries,
        ...(this.depth + 1 < this.tree.settings.maxDepth && { rlmQuery: (call, signal) => this.startChildren(call, signal) }),
        ...(this.tree.settings.tools.size > 0 && { toolCall: (call, signal) => this.callTool(call, signal) }),
      }),
    });
    try {
      if (this.tree.settings.tools.size > 0) await sandbox.setTools(this.tree.settings.tools.definitions());
      for (const code of this.tree.settings.setupCode) await sandbox.addSetupCode(code);
    } catch (error) {
      await sandbox.dispose();
      throw error;
    }
    return sandbox;
  }

  private async runBlock(sandbox: Sandbox, block: CodeBlock, iteration: number, blockIndex: number, signal: AbortSignal): Promise<CodeBlockRecord> {
    this.emit({ type: 'code-start', iteration, block: blockIndex, code: block.code, language: block.language });
    this.currentSubcalls = [];
    this.currentToolCalls = [];
    const subcalls = this.currentSubcalls;
    const toolCalls = this.currentToolCalls;
    let result: ExecuteResult;
    const compiled = block.language === 'ts' ? transpile(block.code) : { code: block.code };
    if ('error' in compiled) {
      result = { stdout: '', error: compiled.error, durationMs: 0, variables: [], reset: false };
    } else {
      result = await sandbox.execute(compiled.code, { signal });
      this.codeHasRun = true;
    }
    this.emit({ type: 'code-end', iteration, block: blockIndex, result });
    return { code: block.code, language: block.language, result, subcalls, toolCalls };
  }

  /**
   * FINAL(...) written as text ends the run only when the reply has no code (the model has not seen
   * that code's output yet) and some code has already run in this run (the model has looked).
   */
  private async acceptTextFinal(
    sandbox: Sandbox,
    parsed: ReturnType<typeof parseReply>,
    signal: AbortSignal,
  ): Promise<{ answer: string } | { note: string }> {
    const final = parsed.textFinal!;
    if (parsed.blocks.length > 0) {
      return { note: 'Your FINAL was ignored: it was in the same reply as code, whose output you had not seen yet. Look at the output above, then answer.' };
    }
    if (!this.codeHasRun) {
      return { note: 'Your FINAL was ignored: you have not run any code or looked at the context yet. Explore the context first.' };
    }
    if (final.kind === 'FINAL') return { answer: final.value };
    const lookup = await sandbox.execute(`FINAL_VAR(${JSON.stringify(final.name)})`, { signal });
    if (lookup.final !== undefined) return { answer: lookup.final };
    return { note: lookup.stdout.trim() || lookup.error?.message || `FINAL_VAR(${final.name}) found no variable.` };
  }

  /** A host tool called from model code; a failed call becomes an error the code can catch. */
  private async callTool(call: Extract<HostCall, { kind: 'tool_call' }>, signal: AbortSignal): Promise<unknown> {
    const result = await this.toolExecutor.executeOne({ name: call.name, arguments: call.arguments }, { signal, invocationId: this.runId });
    if (!result.success) throw new ToolCallError(result.error ?? `${call.name} failed`);
    return result.result;
  }

  // ---- recursion ---------------------------------------------------------------------------------

  private async startChildren(call: Extract<HostCall, { kind: 'rlm_query' | 'rlm_query_batched' }>, signal: AbortSignal): Promise<unknown> {
    const prompts = call.kind === 'rlm_query' ? [call.prompt] : call.prompts;
    const depth = this.depth + 1;
    let queue = this.tree.childQueues.get(depth);
    if (!queue) {
      queue = new PQueue({ concurrency: this.tree.settings.maxConcurrentChildren });
      this.tree.childQueues.set(depth, queue);
    }
    const runs = prompts.map((prompt) => queue.add(() => this.runChild(prompt, call.model, signal), { signal }) as Promise<string>);
    if (call.kind === 'rlm_query') return runs[0];
    return (await Promise.allSettled(runs)).map(itemResult);
  }

  private async runChild(prompt: unknown, model: string | undefined, signal: AbortSignal): Promise<string> {
    signal.throwIfAborted();
    const childModel = model ?? this.rootModel;
    const child = new Run(this.tree, this.gateway.child(), this.depth + 1, childModel, { parentRunId: this.runId, parentSignal: signal });
    const started = performance.now();
    this.emit({ type: 'subcall-start', childRunId: child.runId, model: childModel, promptPreview: preview(prompt) });
    const record: SubcallRecord = { kind: 'rlm', model: childModel, prompt, response: null, durationMs: 0, usage: undefined };
    this.currentSubcalls.push(record);
    try {
      const outcome = await child.execute({ context: prompt, query: undefined });
      record.response = outcome.response;
      record.iterations = outcome.trajectory;
      return outcome.response;
    } catch (error) {
      record.error = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      throw error;
    } finally {
      record.durationMs = performance.now() - started;
      this.emit({
        type: 'subcall-end',
        childRunId: child.runId,
        model: childModel,
        durationMs: record.durationMs,
        ...(record.error !== undefined && { error: record.error }),
      });
    }
  }

  /** Every model call of this run: reported as an event; sub-calls are also recorded on the running block. */
  private onModelCall(event: ModelCallEvent): void {
    this.emit(event);
    if (event.type !== 'llm-call-end' || event.purpose !== 'sub') return;
    this.tree.onRequest?.(event.request, event.response);
    this.currentSubcalls.push({
      kind: 'llm',
      model: event.model,
      prompt: event.request.messages,
      response: event.response?.content ?? null,
      durationMs: event.durationMs,
      usage: event.response?.usage,
      ...(event.error && { error: `${event.error.name}: ${event.error.message}` }),
    });
  }

  // ---- prompts -----------------------------------------------------------------------------------

  private systemPrompt(): string {
    const { settings } = this.tree;
    if (settings.systemPrompt !== undefined) return settings.systemPrompt;
    const canRecurse = this.depth + 1 < settings.maxDepth;
    return render(promptTemplates().system, {
      output_limit: (settings.sandbox.outputLimitChars ?? DEFAULTS.sandbox.outputLimitChars).toLocaleString('en-US'),
      block_timeout: `${Math.round((settings.sandbox.blockTimeoutMs ?? DEFAULTS.sandbox.blockTimeoutMs) / 1000)} s of computation`,
      context_note: this.depth > 0 ? ' (for a child run: the task you were given)' : '',
      sub_model_chars: '500,000',
      recursion_note: canRecurse
        ? 'Child runs cost more than llm_query: use them for real subtasks.'
        : 'Recursion is not available at this depth: it behaves like `llm_query`.',
      tools_section: toolsSection(settings.tools),
    });
  }

  private contextMessage(context: unknown, contextIndex: number | undefined, session: SessionState | undefined): string {
    const parts = [describeContext(context)];
    if (session && contextIndex) {
      parts.push(
        `This is turn ${contextIndex + 1} of a conversation: this turn's input is \`context_${contextIndex}\`; earlier inputs are context_0 to context_${contextIndex - 1}` +
          (session.histories > 0 ? `, and earlier conversations are history_0 to history_${session.histories - 1}.` : '.'),
      );
    }
    if (this.depth > 0) parts.push('You are a child run: `context` holds the task you must complete. Answer it with FINAL.');
    return parts.join('\n');
  }

  private turnPrompt(index: number, query: string | undefined, notes: string[]): string {
    const templates = promptTemplates();
    const querySection = query ? `The query to answer: "${query}"` : 'The task is in `context`.';
    const text = render(index === 1 ? templates.firstTurn : templates.nextTurn, { query_section: querySection });
    return notes.length > 0 ? `${notes.join('\n')}\n\n${text}` : text;
  }

  private outputMessage(block: CodeBlockRecord): ChatMessage {
    const { result } = block;
    const parts: string[] = [];
    if (result.stdout) parts.push(result.stdout.trimEnd());
    if (result.error) parts.push(result.error.stack || `${result.error.name}: ${result.error.message}`);
    if (result.variables.length > 0) {
      const more = result.omittedVariables ? ` and ${result.omittedVariables} more` : '';
      parts.push(`REPL variables: ${result.variables.map((variable) => variable.name).join(', ')}${more}`);
    }
    const output = parts.join('\n\n') || 'No output';
    return { role: 'user', content: `Code executed:\n\`\`\`repl\n${block.code}\n\`\`\`\n\nREPL output:\n${output}` };
  }

  // ---- events and errors -------------------------------------------------------------------------

  private emit(event: DistributiveOmit<RlmEvent, 'runId' | 'depth'>): void {
    this.tree.emit({ ...event, runId: this.runId, depth: this.depth } as RlmEvent);
  }

  /** Limit errors and cancellations get the partial answer; the tree's abort reason wins. */
  private explain(error: unknown): unknown {
    const reason = this.tree.budget.signal.aborted ? this.tree.budget.signal.reason : error;
    if (reason instanceof RunLimitError && reason.partialAnswer === undefined) reason.partialAnswer = this.bestPartial;
    return reason;
  }
}

class ToolCallError extends Error {
  override name = 'ToolError';
}

function toolsSection(tools: ToolRegistry): string {
  if (tools.size === 0) return '';
  const lines = tools.names().map((name) => {
    const tool = tools.get(name)!;
    return `- \`tools.${name}(args)\`: ${tool.description}\n  Parameters (JSON Schema): ${JSON.stringify(tool.parametersSchema)}`;
  });
  return [
    '10. Host tools. Call them as `tools.NAME(args)` (returns the result as a value) or `tool_handler("NAME", args)` (returns it as a string; objects as JSON). `TOOLS` holds their schemas: pass `{ tools: TOOLS, tool_handler }` to `llm_query` to let a sub-model call them. A failed call throws an error you can catch. Prefer tools over sub-models for anything they can compute.',
    ...lines,
  ].join('\n');
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

function transpile(code: string): { code: string } | { error: { name: string; message: string; stack: string } } {
  try {
    return { code: transpileTypeScript(code) };
  } catch (error) {
    const { message } = error as Error;
    return { error: { name: 'SyntaxError', message, stack: `SyntaxError: ${message}` } };
  }
}

function preview(prompt: unknown): string {
  const text = typeof prompt === 'string' ? prompt : JSON.stringify(prompt);
  return text.length > 200 ? `${text.slice(0, 200)}...` : text;
}
