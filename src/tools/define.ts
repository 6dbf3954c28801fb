import { z } from 'zod';
import { ConfigurationError } from '../errors.js';
import type { ToolSpec } from '../lm/types.js';
import { dropNullOptionals, inlineReferences, isZodSchema, parametersJsonSchema, toStrictSchema, type JsonSchema } from './schema.js';

/** Passed to every tool execution. */
export interface ToolContext {
  /** The id of this call (the model's tool_call id, or one made up for calls from code). */
  callId: string;
  /** Groups the calls of one batch (one model reply, one executor run). */
  invocationId: string;
  /** Aborted on timeout, cancellation, or when the run stops. */
  signal: AbortSignal;
}

export type ExecutionPolicy = 'parallel' | 'sequential';

/** Any tool, whatever its argument type (what registries, executors and runs hold). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyTool = Tool<any>;

/** A tool as `defineTool` returns it: the definition plus its OpenAI schema and argument validator. */
export interface Tool<Args = Record<string, unknown>> {
  readonly name: string;
  readonly description: string;
  readonly executionPolicy: ExecutionPolicy | undefined;
  readonly timeoutMs: number | undefined;
  /** Exempt from the executor's default timeout (an explicit timeoutMs still applies). */
  readonly longRunning: boolean;
  readonly strict: boolean;
  /** The function definition sent to models. */
  readonly spec: ToolSpec;
  /** The parameters as JSON Schema (non-strict form), for prompts and docs. */
  readonly parametersSchema: JsonSchema;
  execute(args: Args, context: ToolContext): unknown;
  /** Checks and normalizes arguments; the message says what to fix. */
  validate(args: unknown): { ok: true; value: Args } | { ok: false; message: string };
}

interface ToolOptionsBase {
  name: string;
  description?: string;
  /** How this tool runs beside others in one batch. @default the executor's default ('parallel') */
  executionPolicy?: ExecutionPolicy;
  /** @default the executor's timeout (30 s) */
  timeoutMs?: number;
  longRunning?: boolean;
  /** Send the schema in OpenAI's strict form (checked here, at definition). @default false */
  strict?: boolean;
}

export interface ZodToolOptions<Schema extends z.ZodType> extends ToolOptionsBase {
  parameters: Schema;
  execute(args: z.output<Schema>, context: ToolContext): unknown;
}

export interface JsonSchemaToolOptions extends ToolOptionsBase {
  parameters?: JsonSchema;
  execute(args: Record<string, unknown>, context: ToolContext): unknown;
}

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * Defines a tool for models and model code. `parameters` is a zod schema (arguments are typed
 * from it) or a JSON Schema; both are validated before `execute` runs.
 *
 * @example
 * const getStats = defineTool({
 *   name: 'get_stats',
 *   description: 'Pre-computed statistics for a survey question',
 *   parameters: z.object({ questionId: z.string() }),
 *   execute: async ({ questionId }) => statsCache[questionId] ?? { error: 'unknown question' },
 * });
 */
export function defineTool<Schema extends z.ZodType>(options: ZodToolOptions<Schema>): Tool<z.output<Schema>>;
export function defineTool(options: JsonSchemaToolOptions): Tool;
export function defineTool(options: ZodToolOptions<z.ZodType> | JsonSchemaToolOptions): AnyTool {
  const { name } = options;
  if (typeof name !== 'string' || !TOOL_NAME.test(name)) {
    throw new ConfigurationError(
      `Invalid tool name ${JSON.stringify(name)}: use 1 to 64 letters, digits, underscores or hyphens (OpenAI's rule), e.g. "get_stats".`,
    );
  }
  if (typeof options.execute !== 'function') throw new ConfigurationError(`Tool "${name}": execute must be a function.`);
  if (options.timeoutMs !== undefined && !(options.timeoutMs > 0)) throw new ConfigurationError(`Tool "${name}": timeoutMs must be a positive number of milliseconds.`);
  if (options.parameters !== undefined && (typeof options.parameters !== 'object' || options.parameters === null)) {
    throw new ConfigurationError(`Tool "${name}": parameters must be a zod schema or a JSON Schema object.`);
  }
  if (isOtherZod(options.parameters)) {
    throw new ConfigurationError(
      `Tool "${name}": its parameters are a zod 3 schema (or another zod than 4). rlm needs zod 4: install zod@4 (import { z } from 'zod'), or pass a JSON Schema object.`,
    );
  }

  const description = options.description?.trim() || `Tool ${name}`;
  const strict = options.strict ?? false;
  const parametersSchema = parametersJsonSchema(options.parameters);
  const sent = strict ? toStrictSchema(parametersSchema, name) : withObjectDefaults(parametersSchema);
  const spec: ToolSpec = { type: 'function', function: { name, description, parameters: sent, ...(strict && { strict: true }) } };
  const validator = buildValidator(options.parameters, parametersSchema, name);
  const nullGuide = strict ? inlineReferences(parametersSchema, name) : undefined;

  return Object.freeze({
    name,
    description,
    executionPolicy: options.executionPolicy,
    timeoutMs: options.timeoutMs,
    longRunning: options.longRunning ?? false,
    strict,
    spec,
    parametersSchema,
    execute: options.execute as AnyTool['execute'],
    validate: (args: unknown) => {
      const input = nullGuide ? dropNullOptionals(nullGuide, args) : args;
      if (input === null || typeof input !== 'object' || Array.isArray(input)) {
        return { ok: false as const, message: `Invalid arguments for ${name}: expected a JSON object.` };
      }
      const result = validator(input);
      return result.success
        ? { ok: true as const, value: result.data as never }
        : { ok: false as const, message: `Invalid arguments for ${name}: ${result.issues}. Fix the arguments and call ${name} again.` };
    },
  });
}

/** Accepts a tool object from a setup file: the result of defineTool, or a plain `{ name, description, parameters, execute }`. */
export function toTool(value: unknown, origin: string): AnyTool {
  if (value === null || typeof value !== 'object') throw new ConfigurationError(`${origin}: a tool must be an object, got ${typeof value}.`);
  const candidate = value as Partial<AnyTool> & JsonSchemaToolOptions;
  if (candidate.spec && typeof candidate.validate === 'function') return candidate as AnyTool;
  try {
    return defineTool(candidate as JsonSchemaToolOptions) as AnyTool;
  } catch (error) {
    throw new ConfigurationError(`${origin}: ${(error as Error).message}`);
  }
}

/** zod 3 schemas carry `_def` and `safeParse` but not zod 4's `_zod`: taken as JSON Schema they would validate nothing. */
function isOtherZod(value: unknown): boolean {
  return typeof value === 'object' && value !== null && '_def' in value && typeof (value as { safeParse?: unknown }).safeParse === 'function' && !isZodSchema(value);
}

function withObjectDefaults(schema: JsonSchema): JsonSchema {
  return schema.type === undefined && !schema.properties && !schema.anyOf ? { type: 'object', properties: {}, ...schema } : schema;
}

type Validation = { success: true; data: unknown } | { success: false; issues: string };

function buildValidator(parameters: unknown, jsonSchema: JsonSchema, name: string): (args: unknown) => Validation {
  let schema: z.ZodType | undefined;
  if (isZodSchema(parameters)) schema = parameters;
  else if (parameters !== undefined) {
    try {
      schema = z.fromJSONSchema(inlineReferences(jsonSchema, name) as never) as z.ZodType;
    } catch (error) {
      throw new ConfigurationError(`Tool "${name}": its JSON Schema cannot be used for validation: ${(error as Error).message}`);
    }
  }
  if (!schema) return (args) => ({ success: true, data: args });
  return (args) => {
    const result = schema.safeParse(args);
    if (result.success) return { success: true, data: result.data };
    return { success: false, issues: result.error.issues.map((issue) => describeIssue(issue, args)).join('; ') };
  };
}

function describeIssue(issue: z.core.$ZodIssue, args: unknown): string {
  const path = issue.path.length > 0 ? issue.path.map(String).join('.') : '(arguments)';
  if (issue.path.length > 0 && valueAt(args, issue.path) === undefined) return `${path}: required`;
  return `${path}: ${issue.message.replace(/^Invalid (input|option): /, '')}`;
}

function valueAt(value: unknown, path: PropertyKey[]): unknown {
  let current = value;
  for (const key of path) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<PropertyKey, unknown>)[key];
  }
  return current;
}
