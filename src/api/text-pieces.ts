/** Long texts stream in several pieces, as a model's would. */
export function textPieces(text: string, size = 1_000): string[] {
  if (text.length <= size) return [text];
  const result: string[] = [];
  for (let start = 0; start < text.length; start += size) result.push(text.slice(start, start + size));
  return result;
}
