// Keeps a run's root conversation inside its model's context window. Each turn the conversation is
// measured (the prompt tokens the provider reported for the last root call, plus an estimate for
// what was added since); past the threshold the root model summarizes its progress and the summary
// replaces the older turns, while the full conversation goes into the sandbox as `history`.
import { DEFAULTS } from '../defaults.js';
import { estimateTokens } from '../lm/token-estimate.js';
import type { ChatMessage } from '../lm/types.js';

/** Context windows (tokens) of known models, by name prefix; the longest matching prefix wins. */
const KNOWN_WINDOWS: [prefix: string, tokens: number][] = [
  ['gpt-5', 400_000],
  ['gpt-4.1', 1_047_576],
  ['gpt-4o', 128_000],
  ['gpt-4-turbo', 128_000],
  ['gpt-4', 8_192],
  ['gpt-3.5-turbo', 16_385],
  ['o1', 200_000],
  ['o3', 200_000],
  ['o4-mini', 200_000],
  ['claude', 200_000],
  ['gemini-1.5', 1_000_000],
  ['gemini-2', 1_000_000],
  ['llama3.1', 128_000],
  ['llama-3.1', 128_000],
  ['qwen2.5', 32_768],
  ['Qwen/Qwen2.5', 32_768],
  ['deepseek', 128_000],
  ['mistral-large', 128_000],
];

export function contextWindowOf(model: string, configured: number | undefined): number {
  if (configured !== undefined) return configured;
  const name = model.includes('/') && !model.startsWith('Qwen/') ? model.slice(model.lastIndexOf('/') + 1) : model;
  let best: [string, number] | undefined;
  for (const entry of KNOWN_WINDOWS) if (name.startsWith(entry[0]) && (!best || entry[0].length > best[0].length)) best = entry;
  return best?.[1] ?? DEFAULTS.engine.contextWindow;
}

/**
 * Measures a growing conversation. After a root call it knows the size of the prompt it sent as the
 * provider counted it; later messages are estimated on top of that.
 */
export class ConversationMeter {
  private reported: { messages: ChatMessage[]; tokens: number } | undefined;

  /** Records what the provider counted for a prompt (0 when it reported nothing). */
  report(prompt: ChatMessage[], promptTokens: number): void {
    this.reported = promptTokens > 0 ? { messages: prompt, tokens: promptTokens } : undefined;
  }

  /** The larger of the two measures: an estimate errs high for English, a provider count for other scripts. */
  measure(conversation: ChatMessage[]): number {
    const estimate = estimateTokens(conversation);
    const known = this.reported;
    if (known && known.messages.length <= conversation.length && known.messages.every((message, index) => message === conversation[index])) {
      return Math.max(estimate, known.tokens + estimateTokens(conversation.slice(known.messages.length)));
    }
    return estimate;
  }
}
