// How a tool call the model wrote is checked, wherever tools run (host executor or tool loop), so
// the model reads the same corrections everywhere.

export function unknownToolMessage(name: string, available: Iterable<string>): string {
  return `Unknown tool "${name}". Available tools: ${[...available].join(', ') || 'none'}.`;
}

/** Arguments as the model wrote them (JSON text; empty means none) parsed into an object. */
export function parseToolArguments(name: string, text: string): { ok: true; value: Record<string, unknown> } | { ok: false; message: string } {
  let parsed: unknown;
  try {
    parsed = text.trim() === '' ? {} : JSON.parse(text);
  } catch (error) {
    return { ok: false, message: `The arguments for ${name} are not valid JSON (${(error as Error).message}). Send a JSON object.` };
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    return { ok: false, message: `The arguments for ${name} must be a JSON object.` };
  }
  return { ok: true, value: parsed as Record<string, unknown> };
}
