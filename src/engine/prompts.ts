import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULTS } from '../defaults.js';
import { InstallationError } from '../errors.js';
import { formatCount } from '../format.js';
import { isFileContext } from '../sandbox/context-file.js';
import { packageRoot } from '../paths.js';
import type { ToolSpec } from '../lm/types.js';
import type { ToolRegistry } from '../tools/registry.js';
import type { CodeBlockRecord } from './events.js';

// Every text the root model reads comes from prompts/*.md; this module only fills placeholders.

const MESSAGE_NAMES = [
  'empty-reply',
  'no-code',
  'final-with-code',
  'final-before-code',
  'final-var-missing',
  'query',
  'task-in-context',
  'session-turn',
  'session-turn-with-history',
  'child-run',
  'code-output',
  'no-output',
  'variables',
  'tool',
  'context-string',
  'context-array',
  'context-object',
  'context-other',
  'context-file',
  'caller-tools',
  'compact-request',
  'compacted',
  'output-cut',
  'tool-calls-as-text',
  'tool-result-as-text',
  'output-section',
  'final-invalid',
  'final-invalid-text',
  'force-final-output',
  'subcall-schema',
  'subcall-schema-retry',
] as const;
type MessageName = (typeof MESSAGE_NAMES)[number];

interface PromptTemplates {
  system: string;
  firstTurn: string;
  nextTurn: string;
  forceFinal: string;
  tools: string;
  messages: Record<MessageName, string>;
}

let cached: PromptTemplates | undefined;

function templates(): PromptTemplates {
  if (!cached) {
    const read = (name: string) => readFileSync(join(packageRoot(), 'prompts', name), 'utf8');
    cached = {
      system: read('system.md'),
      firstTurn: read('first-turn.md'),
      nextTurn: read('next-turn.md'),
      forceFinal: read('force-final.md'),
      tools: read('tools.md'),
      messages: parseMessages(read('messages.md')),
    };
  }
  return cached;
}

/** Splits messages.md into its "## name" sections; a missing section is a packaging error. */
function parseMessages(text: string): Record<MessageName, string> {
  const sections = new Map<string, string>();
  const parts = text.split(/^## ([\w-]+)[ \t]*$/m);
  for (let index = 1; index < parts.length; index += 2) sections.set(parts[index]!, parts[index + 1]!.replace(/^\n+|\s+$/g, ''));
  const messages = {} as Record<MessageName, string>;
  for (const name of MESSAGE_NAMES) {
    const section = sections.get(name);
    if (section === undefined) throw new InstallationError(`prompts/messages.md has no "## ${name}" section: reinstall rlm`);
    messages[name] = section;
  }
  return messages;
}

/** Replaces {{name}} placeholders; unknown placeholders are left as they are. */
function render(template: string, values: Record<string, string>): string {
  return template.replace(/\{\{(\w+)\}\}/g, (match, name: string) => values[name] ?? match);
}

/** One of the short messages in prompts/messages.md, filled in. */
export function message(name: MessageName, values: Record<string, string> = {}): string {
  return render(templates().messages[name], values);
}

interface SystemPromptSettings {
  outputLimitChars: number | undefined;
  blockTimeoutMs: number | undefined;
  /** Depth of the run in the tree (0 for the root). */
  depth: number;
  canRecurse: boolean;
  tools: ToolRegistry;
  /** Tools of the caller (see CallerTools): asynchronous in code, native to the root model. */
  callerTools: ToolSpec[];
  /** The output schema in one line, when the caller gave one. */
  outputSchema?: string | undefined;
}

export function systemPrompt(settings: SystemPromptSettings): string {
  return render(templates().system, {
    output_limit: formatCount(settings.outputLimitChars ?? DEFAULTS.sandbox.outputLimitChars),
    block_timeout: `${Math.round((settings.blockTimeoutMs ?? DEFAULTS.sandbox.blockTimeoutMs) / 1000)} s of computation`,
    context_note: settings.depth > 0 ? ' (for a child run: the task you were given)' : '',
    sub_model_chars: '500,000',
    recursion_note: settings.canRecurse
      ? 'Child runs cost more than llm_query: use them for real subtasks.'
      : 'Recursion is not available at this depth: it behaves like `llm_query`.',
    tools_section: [toolsSection(settings.tools), callerToolsSection(settings.callerTools)].filter(Boolean).join('\n'),
    output_section: settings.outputSchema === undefined ? '' : `\n\n${message('output-section', { schema: settings.outputSchema })}`,
  });
}

function callerToolsSection(specs: ToolSpec[]): string {
  if (specs.length === 0) return '';
  const list = specs.map((spec) =>
    message('tool', { name: spec.function.name, description: spec.function.description ?? '', parameters: JSON.stringify(spec.function.parameters ?? {}) }),
  );
  return message('caller-tools', { tool_list: list.join('\n') });
}

function toolsSection(tools: ToolRegistry): string {
  if (tools.size === 0) return '';
  const list = tools.names().map((name) => {
    const tool = tools.get(name)!;
    return message('tool', { name, description: tool.description, parameters: JSON.stringify(tool.parametersSchema) });
  });
  return render(templates().tools, { tool_list: list.join('\n') }).trimEnd();
}

/** The names a run's inputs get in a session's sandbox (see RunSandbox). */
export interface SessionNames {
  /** The run's context is context_N (and, for N = 0, `context`); undefined outside a session. */
  contextIndex: number | undefined;
  /** Earlier conversations loaded so far: history_0 to history_(N - 1). */
  histories: number;
}

/**
 * The first user message: what the context is (never the context itself), and where the run is: a
 * child run, or a later turn of a session (with the names its inputs have in the sandbox).
 */
export function contextMessage({ context, depth, names }: { context: unknown; depth: number; names: SessionNames }): string {
  const parts = [describeContext(context)];
  const { contextIndex, histories } = names;
  if (contextIndex) {
    const values = { turn: String(contextIndex + 1), index: String(contextIndex), previous: String(contextIndex - 1), last_history: String(histories - 1) };
    parts.push(message(histories > 0 ? 'session-turn-with-history' : 'session-turn', values));
  }
  if (depth > 0) parts.push(message('child-run'));
  return parts.join('\n');
}

/** The user message that asks for the next turn, after any notes about the last one. */
export function turnPrompt(index: number, query: string | undefined, notes: string[]): string {
  const querySection = query ? message('query', { query }) : message('task-in-context');
  const text = render(index === 1 ? templates().firstTurn : templates().nextTurn, { query_section: querySection });
  return notes.length > 0 ? `${notes.join('\n')}\n\n${text}` : text;
}

/** The last request of a run out of turns; with an output schema it asks for JSON matching it. */
export function forceFinalPrompt(outputSchema?: string): string {
  return outputSchema === undefined ? templates().forceFinal : message('force-final-output', { schema: outputSchema });
}

/**
 * What FINAL in a block throws when its value does not match the output schema: the sandbox worker
 * fills in `{{problems}}` (see Sandbox.setOutputSchema).
 */
export function finalRefusalTemplate(): string {
  return message('final-invalid', { caller: 'FINAL' });
}

/** What the root model sees of a block it ran: its code, output, error and variables. */
export function blockOutputMessage(block: CodeBlockRecord): string {
  const { result } = block;
  const parts: string[] = [];
  if (result.stdout) parts.push(result.stdout.trimEnd());
  if (result.error) parts.push(result.error.stack || `${result.error.name}: ${result.error.message}`);
  if (result.variables.length > 0) {
    const names = result.variables.map((variable) => variable.name).join(', ');
    parts.push(message('variables', { names, more: result.omittedVariables ? ` and ${result.omittedVariables} more` : '' }));
  }
  return message('code-output', { code: block.code, output: parts.join('\n\n') || message('no-output') });
}

/** What the root model learns about the context instead of the context itself. */
function describeContext(context: unknown): string {
  if (typeof context === 'string') return message('context-string', { length: formatCount(context.length) });
  if (isFileContext(context)) return message('context-file', { bytes: formatCount(context.bytes) });
  if (Array.isArray(context)) {
    const lengths = context.map(itemLength);
    const total = lengths.reduce((sum, length) => sum + length, 0);
    const more = lengths.length > 100 ? `, ... (${lengths.length - 100} more)` : '';
    return message('context-array', { count: formatCount(context.length), total: formatCount(total), lengths: `${lengths.slice(0, 100).join(', ')}${more}` });
  }
  if (context !== null && typeof context === 'object') {
    const keys = Object.keys(context);
    const shownKeys = keys.slice(0, 30).join(', ') + (keys.length > 30 ? `, ... (${keys.length - 30} more)` : '');
    return message('context-object', { count: String(keys.length), keys: shownKeys, length: formatCount(JSON.stringify(context).length) });
  }
  return message('context-other', { type: context === null ? 'null' : typeof context });
}

function itemLength(item: unknown): number {
  if (typeof item === 'string') return item.length;
  try {
    return JSON.stringify(item)?.length ?? 0;
  } catch {
    return 0;
  }
}
