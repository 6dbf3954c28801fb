/** A fenced code block the engine runs. */
export interface CodeBlock {
  code: string;
  language: 'js' | 'ts';
}

export interface ParsedReply {
  /** Runnable blocks in order: ```repl, ```js / javascript, ```ts / typescript. */
  blocks: CodeBlock[];
  /** A FINAL(...) or FINAL_VAR(...) written as text at the start of a line, outside any fence. */
  textFinal?: TextFinal;
  /** The reply without its fenced blocks, trimmed. */
  prose: string;
}

export type TextFinal = { kind: 'FINAL'; value: string } | { kind: 'FINAL_VAR'; name: string };

const RUNNABLE: Record<string, CodeBlock['language']> = {
  repl: 'js',
  js: 'js',
  javascript: 'js',
  ts: 'ts',
  typescript: 'ts',
};

const FENCE = /^\s*```\s*([\w-]*)/;

/**
 * Splits a reply into fenced code and prose. A fence opens with ```lang at the start of a line and
 * closes with a line that is only ```; text inside fences never counts as a final answer.
 */
export function parseReply(reply: string): ParsedReply {
  const blocks: CodeBlock[] = [];
  const prose: string[] = [];
  const lines = reply.split('\n');
  let fence: { language: string; lines: string[] } | undefined;
  for (const line of lines) {
    if (fence) {
      if (/^\s*```\s*$/.test(line)) {
        const language = RUNNABLE[fence.language.toLowerCase()];
        if (language) blocks.push({ code: fence.lines.join('\n'), language });
        fence = undefined;
      } else {
        fence.lines.push(line);
      }
      continue;
    }
    const opening = FENCE.exec(line);
    if (opening) {
      fence = { language: opening[1] ?? '', lines: [] };
      const rest = line.slice(opening[0].length);
      // A one-line block: ```repl print(1) ```
      const inline = /^(.*?)```\s*$/.exec(rest);
      if (inline && rest.trim() !== '') {
        const language = RUNNABLE[fence.language.toLowerCase()];
        if (language) blocks.push({ code: inline[1]!.trim(), language });
        fence = undefined;
      }
      continue;
    }
    prose.push(line);
  }
  // An unclosed fence at the end still counts as code (models get cut off), never as prose.
  if (fence) {
    const language = RUNNABLE[fence.language.toLowerCase()];
    if (language && fence.lines.join('').trim() !== '') blocks.push({ code: fence.lines.join('\n'), language });
  }
  const text = prose.join('\n');
  const textFinal = findTextFinal(text);
  return { blocks, prose: text.trim(), ...(textFinal && { textFinal }) };
}

/**
 * What a reply offers as an answer if the run stops now: its FINAL(...) text, else its prose.
 * Never code: a reply that is only code offers nothing.
 */
export function partialAnswerOf(reply: string): string | undefined {
  const parsed = parseReply(reply);
  if (parsed.textFinal?.kind === 'FINAL') return parsed.textFinal.value;
  // FINAL_VAR(name) names where the answer is, it is not the answer: its line is no answer text.
  const prose = parsed.textFinal?.kind === 'FINAL_VAR' ? parsed.prose.replace(FINAL_VAR_LINE, '').trim() : parsed.prose;
  return prose || undefined;
}

const FINAL_VAR_LINE = /^[ \t]*(?:\*\*)?FINAL_VAR\s*\(.*$/gm;

/** Finds FINAL(...) / FINAL_VAR(...) at the start of a line; parentheses inside are kept whole. */
function findTextFinal(prose: string): TextFinal | undefined {
  const start = /^[ \t]*(?:\*\*)?(FINAL_VAR|FINAL)\s*\(/m.exec(prose);
  if (!start) return undefined;
  const open = start.index + start[0].length;
  let depth = 1;
  let index = open;
  for (; index < prose.length && depth > 0; index++) {
    const char = prose[index];
    if (char === '(') depth++;
    else if (char === ')') depth--;
  }
  // Unbalanced: take everything up to the last closing parenthesis, or to the end.
  const close = depth === 0 ? index - 1 : Math.max(prose.lastIndexOf(')'), open);
  const inner = prose.slice(open, close > open ? close : prose.length).trim();
  if (start[1] === 'FINAL_VAR') return { kind: 'FINAL_VAR', name: inner.replace(/^["'`]|["'`]$/g, '').trim() };
  return { kind: 'FINAL', value: unquote(inner) };
}

/** FINAL("text") and FINAL('text') mean the text; FINAL(text) means the text as written. */
function unquote(value: string): string {
  const match = /^(["'`])([\s\S]*)\1$/.exec(value);
  if (!match) return value;
  if (match[1] === '"') {
    try {
      return JSON.parse(value) as string;
    } catch {
      return match[2]!;
    }
  }
  return match[2]!;
}
