/** Whether `text` is one JSON value (a JSONL line, a model's reply that needs no unwrapping). */
export function isJsonText(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
