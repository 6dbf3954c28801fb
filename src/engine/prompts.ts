import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../paths.js';

/** The prompt templates in prompts/, read once. Placeholders look like {{name}}. */
export interface PromptTemplates {
  system: string;
  firstTurn: string;
  nextTurn: string;
  forceFinal: string;
}

let cached: PromptTemplates | undefined;

export function promptTemplates(): PromptTemplates {
  if (!cached) {
    const read = (name: string) => readFileSync(join(packageRoot(), 'prompts', name), 'utf8');
    cached = { system: read('system.md'), firstTurn: read('first-turn.md'), nextTurn: read('next-turn.md'), forceFinal: read('force-final.md') };
  }
  return cached;
}

/** Replaces {{name}} placeholders; unknown placeholders are left as they are. */
export function render(template: string, values: Record<string, string>): string {
  return template.replace(/\{\{(\w+)\}\}/g, (match, name: string) => values[name] ?? match);
}

/** What the root model learns about the context instead of the context itself. */
export function describeContext(context: unknown): string {
  if (typeof context === 'string') {
    return `Your context is a string of ${context.length.toLocaleString('en-US')} characters.`;
  }
  if (Array.isArray(context)) {
    const lengths = context.map(itemLength);
    const total = lengths.reduce((sum, length) => sum + length, 0);
    const shown = lengths.slice(0, 100).join(', ');
    const more = lengths.length > 100 ? `, ... (${lengths.length - 100} more)` : '';
    return `Your context is an array of ${context.length.toLocaleString('en-US')} items with ${total.toLocaleString('en-US')} characters in total. Item lengths in characters: [${shown}${more}].`;
  }
  if (context !== null && typeof context === 'object') {
    const keys = Object.keys(context);
    const shownKeys = keys.slice(0, 30).join(', ') + (keys.length > 30 ? `, ... (${keys.length - 30} more)` : '');
    return `Your context is an object with ${keys.length} keys (${shownKeys}) and ${JSON.stringify(context).length.toLocaleString('en-US')} characters as JSON.`;
  }
  return `Your context is a ${context === null ? 'null' : typeof context} value.`;
}

function itemLength(item: unknown): number {
  if (typeof item === 'string') return item.length;
  try {
    return JSON.stringify(item)?.length ?? 0;
  } catch {
    return 0;
  }
}
