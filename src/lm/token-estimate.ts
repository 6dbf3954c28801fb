import type { ChatMessage } from './types.js';

/**
 * Characters per token, for estimates that must err high: English and code average about 4 under
 * the common BPE vocabularies, so 3.5 overcounts them a little. The same figure turns tokens back
 * into characters (an output cut to fit the window), so a cut output measures what it was cut to.
 */
export const CHARS_PER_TOKEN = 3.5;

/** A token estimate that errs high (see CHARS_PER_TOKEN), plus the few tokens each message's framing costs. */
export function estimateTokens(messages: ChatMessage[]): number {
  let chars = 0;
  for (const message of messages) chars += typeof message.content === 'string' ? message.content.length : JSON.stringify(message.content ?? '').length;
  return Math.ceil(chars / CHARS_PER_TOKEN) + 4 * messages.length;
}
