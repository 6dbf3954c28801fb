// The chat templates of many local models (Mistral, Mixtral, Gemma, ... behind vLLM, llama.cpp or
// Ollama) raise "Conversation roles must alternate user/assistant/user/assistant/..." on anything
// else, so the root model would fail on its first call. A run's own conversation keeps one message
// per event (a block's output, a note, a tool result); what is sent is reshaped here, in one place.
import type { ChatMessage, ContentPart } from '../lm/types.js';
import { message } from './prompts.js';

type AssistantMessage = Extract<ChatMessage, { role: 'assistant' }>;
type ToolMessage = Extract<ChatMessage, { role: 'tool' }>;
type Content = string | ContentPart[] | null;

/**
 * A root request with roles every chat template accepts: one optional system message first, then
 * user and assistant in turn, starting with user. Neighbours of one role are merged, their texts
 * joined by a blank line (a later system message counts as the user's).
 *
 * Tool-call turns (an assistant message with `tool_calls` and the `tool` messages that answer it)
 * are the one exception templates with tools accept: they skip those messages when checking the
 * alternation (Mistral's template does exactly that), so they stay native when the model speaks
 * next, which is how runs send them. A tool-call turn followed by a user's message would leave two
 * user turns in a row around it; it is written out as text instead (the calls in the assistant's
 * message, the results in the user's), which every template reads.
 */
export function alternateRoles(messages: ChatMessage[]): ChatMessage[] {
  const leading = messages.findIndex((entry) => entry.role !== 'system' && entry.role !== 'developer');
  const systemCount = leading === -1 ? messages.length : leading;
  const sent: ChatMessage[] = [];
  if (systemCount > 0) sent.push({ role: 'system', content: joinTexts(messages.slice(0, systemCount).map((entry) => entry.content as string)) as string });
  for (let index = systemCount; index < messages.length; index++) {
    const entry = messages[index]!;
    if (entry.role === 'assistant' && entry.tool_calls?.length) {
      const results = toolResultsAfter(messages, index);
      const next = messages[index + 1 + results.length];
      if (next !== undefined && next.role !== 'assistant') {
        append(sent, { role: 'assistant', content: joinTexts([entry.content, toolCallsText(entry)]) as string });
        append(sent, { role: 'user', content: toolResultsText(entry, results) });
      } else {
        append(sent, entry);
        sent.push(...results);
      }
      index += results.length;
    } else if (entry.role === 'assistant') {
      append(sent, entry);
    } else {
      // A tool message here answers no tool-call turn (none is ever built so): its text is kept as the user's.
      append(sent, { role: 'user', content: entry.content });
    }
  }
  return sent;
}

/** Adds a message, merged into the last one when both have the same role. */
function append(sent: ChatMessage[], entry: ChatMessage): void {
  const last = sent.at(-1);
  if (last?.role === 'user' && entry.role === 'user') {
    sent[sent.length - 1] = { role: 'user', content: joinTexts([last.content, entry.content])! };
  } else if (last?.role === 'assistant' && entry.role === 'assistant' && !last.tool_calls?.length) {
    // A plain reply before a tool-call reply joins it: the tool calls stay on the merged message.
    sent[sent.length - 1] = { ...entry, content: joinTexts([last.content, entry.content]) as string | null };
  } else {
    sent.push(entry);
  }
}

/** Texts joined by a blank line, empty ones left out; content parts stay parts. */
function joinTexts(contents: Content[]): Content {
  const present = contents.filter((content) => content !== null && content !== '' && !(Array.isArray(content) && content.length === 0)) as (string | ContentPart[])[];
  if (present.length === 0) return contents.some((content) => content === '') ? '' : null;
  if (present.every((content) => typeof content === 'string')) return present.join('\n\n');
  const parts: ContentPart[] = [];
  for (const content of present) {
    if (parts.length > 0) parts.push({ type: 'text', text: '\n\n' });
    parts.push(...(typeof content === 'string' ? [{ type: 'text', text: content }] : content));
  }
  return parts;
}

function toolResultsAfter(messages: ChatMessage[], index: number): ToolMessage[] {
  const results: ToolMessage[] = [];
  for (let next = index + 1; messages[next]?.role === 'tool'; next++) results.push(messages[next] as ToolMessage);
  return results;
}

function toolCallsText(entry: AssistantMessage): string {
  const calls = (entry.tool_calls ?? []).map((call) => `${call.function.name}(${call.function.arguments})`);
  return message('tool-calls-as-text', { calls: calls.join('\n') });
}

function toolResultsText(entry: AssistantMessage, results: ToolMessage[]): string {
  const names = new Map((entry.tool_calls ?? []).map((call) => [call.id, call.function.name]));
  const lines = results.map((result) => message('tool-result-as-text', { name: names.get(result.tool_call_id) ?? result.tool_call_id, result: result.content }));
  return lines.join('\n\n');
}
