/**
 * What a strict chat template (Mistral's, Gemma's, ... as vLLM, llama.cpp and Ollama apply them)
 * refuses in a conversation, or undefined when it would render it. After one optional system
 * message, user and assistant must alternate, starting with the user; tool-call turns (an assistant
 * message with `tool_calls`, then `tool` messages) are skipped by the check, as Mistral's template
 * skips them; and the conversation must end with the user's turn or tool results, for the model to
 * answer.
 */
export function chatTemplateProblem(messages: unknown): string | undefined {
  if (!Array.isArray(messages) || messages.length === 0) return 'messages must be a non-empty array';
  const roles = messages.map((entry) => entry as { role?: unknown; tool_calls?: unknown[] });
  let expectUser = true;
  for (const [index, entry] of roles.entries()) {
    if (entry.role === 'system' && index === 0) continue;
    if (entry.role === 'tool') {
      const previous = roles[index - 1];
      if (previous?.role !== 'tool' && !(previous?.role === 'assistant' && previous.tool_calls?.length)) return `message ${index} is a tool result that answers no tool call`;
      continue;
    }
    if (entry.role === 'assistant' && Array.isArray(entry.tool_calls) && entry.tool_calls.length > 0) continue;
    if (entry.role !== (expectUser ? 'user' : 'assistant')) return `message ${index} has role "${String(entry.role)}" where "${expectUser ? 'user' : 'assistant'}" was due`;
    expectUser = !expectUser;
  }
  const last = roles.at(-1)!.role;
  if (last !== 'user' && last !== 'tool') return `the last message has role "${String(last)}", not the user's`;
  return undefined;
}
