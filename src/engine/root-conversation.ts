import type { ChatMessage } from '../lm/types.js';
import { alternateRoles } from './alternation.js';
import { CHARS_PER_TOKEN, estimateTokens } from '../lm/token-estimate.js';
import { ConversationMeter } from './compaction.js';
import type { CodeBlockRecord, CompactionRecord } from './events.js';
import { RunLimitError } from './limits.js';
import { blockOutputMessage, forceFinalPrompt, message, turnPrompt } from './prompts.js';
import type { RunSettings } from './run-types.js';
import { formatCount } from '../format.js';

/** Room kept for the message each turn adds after the conversation (turn number, query, notes). */
const TURN_PROMPT_ALLOWANCE = 200;
/** The most of the window one block's output may take; a longer output is cut to it. */
const OUTPUT_SHARE_OF_WINDOW = 0.5;
/** Room kept, in characters, for the note that says an output was cut. */
const CUT_NOTE_CHARS = 200;

/** A root request: the messages as the run records them, and as they are sent. */
export interface RootPrompt {
  readonly messages: ChatMessage[];
  /** Roles alternating as strict chat templates require (see alternateRoles). */
  readonly sent: ChatMessage[];
}

interface RootConversationOptions {
  systemPrompt: string;
  /** What the context is, and the run's place (see contextMessage). */
  firstMessage: string;
  query: string | undefined;
  rootModel: string;
  /** Tokens the root model can read. */
  contextWindow: number;
  compaction: RunSettings['compaction'];
  /** Asks the root model; compaction asks it for a summary. */
  ask: (prompt: RootPrompt, signal: AbortSignal) => Promise<string>;
  /** Loads every message compactions replaced into the sandbox (as `history`). */
  loadHistory: (messages: ChatMessage[], signal: AbortSignal) => Promise<void>;
  onCompaction: (record: CompactionRecord) => void;
}

/**
 * A run's conversation with its root model: one message per event (a reply, a block's output, a
 * tool result), kept inside the model's context window. The prompts of turns are built from it and
 * are not kept, so notes about one turn do not weigh on the next.
 */
export class RootConversation {
  readonly #options: RootConversationOptions;
  readonly #messages: ChatMessage[];
  readonly #meter = new ConversationMeter();
  /** Every message the conversation had before compactions replaced them (the sandbox's `history`). */
  readonly #history: ChatMessage[] = [];
  /** Where the turns start: after the system prompt and the first message (and a summary). */
  #turnsStart = 2;

  constructor(options: RootConversationOptions) {
    this.#options = options;
    this.#messages = [
      { role: 'system', content: options.systemPrompt },
      { role: 'user', content: options.firstMessage },
    ];
  }

  /** The conversation so far (for sessions: loaded as history_N by the next completion). */
  get messages(): readonly ChatMessage[] {
    return this.#messages;
  }

  add(...messages: ChatMessage[]): void {
    this.#messages.push(...messages);
  }

  /**
   * The prompt of turn `index`: the conversation, then a user message with the notes about the last
   * turn and the question (`asked`). After the caller's tool results the model speaks next, as in
   * any tool-calling exchange, so nothing is asked (see alternateRoles).
   */
  nextTurn({ index, notes }: { index: number; notes: string[] }): { prompt: RootPrompt; asked: ChatMessage[] } {
    const asked: ChatMessage[] = this.#messages.at(-1)?.role === 'tool' ? [] : [{ role: 'user', content: turnPrompt(index, this.#options.query, notes) }];
    return { prompt: rootPrompt([...this.#messages, ...asked]), asked };
  }

  /** The prompt of the forced last turn: the conversation, then the request for the best answer. */
  lastTurn(outputSchema?: string): RootPrompt {
    return rootPrompt([...this.#messages, { role: 'user', content: forceFinalPrompt(outputSchema) }]);
  }

  /** Records what the provider counted for a prompt it was sent (0 when it reported nothing). */
  measured(prompt: RootPrompt, promptTokens: number): void {
    this.#meter.report(prompt.messages.slice(0, -1), promptTokens);
  }

  /** What the root model reads of the blocks it ran: one message each, cut to fit the window. */
  blockOutputs(blocks: CodeBlockRecord[]): ChatMessage[] {
    return blocks.map((block) => ({ role: 'user', content: this.#fitOutput(blockOutputMessage(block)) }));
  }

  /**
   * Keeps the conversation, as the next turn will send it, inside the root model's window: past the
   * threshold the root model summarizes and the summary replaces the turns (see compaction.ts);
   * with compaction off, a conversation that would overflow ends the run with `context_window`.
   */
  async fit(signal: AbortSignal): Promise<void> {
    const { compaction, contextWindow, rootModel } = this.#options;
    const tokens = this.#tokens();
    if (compaction && tokens >= (contextWindow * compaction.thresholdPct) / 100 && this.#messages.length > this.#turnsStart) {
      await this.#compact(tokens, signal);
      return;
    }
    if (tokens > contextWindow) {
      throw new RunLimitError('context_window', `The root conversation (about ${formatCount(tokens)} tokens) no longer fits the context window of ${rootModel} (${formatCount(contextWindow)} tokens), and compaction is off.`);
    }
  }

  async #compact(tokensBefore: number, signal: AbortSignal): Promise<void> {
    const { contextWindow, rootModel, query } = this.#options;
    const started = performance.now();
    const summary = await this.#options.ask(rootPrompt([...this.#messages, { role: 'user', content: message('compact-request') }]), signal);
    if (this.#history.length === 0) this.#history.push(...this.#messages.slice(0, 2));
    const replaced = this.#messages.slice(this.#turnsStart);
    this.#history.push(...replaced);
    await this.#options.loadHistory(this.#history, signal);
    const kept: ChatMessage[] = [
      this.#messages[0]!,
      this.#messages[1]!,
      { role: 'assistant', content: summary },
      { role: 'user', content: [message('compacted', { turns: String(replaced.length) }), query !== undefined ? message('query', { query }) : ''].filter(Boolean).join('\n\n') },
    ];
    this.#messages.splice(0, this.#messages.length, ...kept);
    this.#turnsStart = kept.length;
    const tokensAfter = this.#tokens();
    this.#options.onCompaction({ tokensBefore, tokensAfter, contextWindow, messagesReplaced: replaced.length, summary, durationMs: performance.now() - started });
    if (tokensAfter > contextWindow) {
      throw new RunLimitError('context_window', `Even compacted, the root conversation (about ${formatCount(tokensAfter)} tokens) does not fit the context window of ${rootModel} (${formatCount(contextWindow)} tokens).`);
    }
  }

  /** The conversation's size as the next turn will send it. */
  #tokens(): number {
    return this.#meter.measure(this.#messages) + TURN_PROMPT_ALLOWANCE;
  }

  /** A block output that alone would fill most of the window is cut, saying so. */
  #fitOutput(text: string): string {
    const allowed = this.#options.contextWindow * OUTPUT_SHARE_OF_WINDOW;
    if (estimateTokens([{ role: 'user', content: text }]) <= allowed) return text;
    const shown = Math.floor(allowed * CHARS_PER_TOKEN) - CUT_NOTE_CHARS;
    return `${text.slice(0, shown)}\n${message('output-cut', { shown: formatCount(shown), total: formatCount(text.length) })}`;
  }
}

function rootPrompt(messages: ChatMessage[]): RootPrompt {
  return { messages, sent: alternateRoles(messages) };
}

