// The schema a caller gives for the final answer (`completion({ output })`), as a zod 4 schema or a
// JSON Schema object. Both forms end as one zod schema, so every check (FINAL in a block, a text
// FINAL, the forced last answer) uses the same validator and reports problems the same way.
import { z } from 'zod';
import { ConfigurationError } from '../errors.js';
import { clip } from '../sandbox/shared.js';
import { dropNullOptionals, isZodSchema, toStrictSchema, type JsonSchema } from '../tools/schema.js';

/** What `output` may be: a zod schema, or a JSON Schema object. */
export type OutputSchemaSpec = z.ZodType | Record<string, unknown>;

/** A checked answer: the value the schema produced and its JSON text; or why it does not match. */
export type CheckedAnswer = { value: unknown; json: string } | { problems: string[] };

// A value wrong in a million places is reported by its first few problems: enough to fix the code.
const LISTED_PROBLEMS = 10;
const PROBLEM_CHARS = 300;

export class OutputSchema {
  readonly zod: z.ZodType;
  /** The schema as JSON Schema (what the model must produce: the input side of a zod schema). */
  readonly jsonSchema: JsonSchema;
  /** The form OpenAI's strict structured output accepts; undefined when the schema has none. */
  readonly strictSchema: JsonSchema | undefined;

  constructor(spec: unknown) {
    if (isZodSchema(spec)) {
      this.zod = spec;
      this.jsonSchema = withoutDialect(z.toJSONSchema(spec, { io: 'input', unrepresentable: 'any' }) as JsonSchema);
    } else {
      this.jsonSchema = withoutDialect(requireJsonSchema(spec));
      this.zod = zodOf(this.jsonSchema);
    }
    this.strictSchema = strictFormOf(this.jsonSchema);
  }

  /** The schema in one line, for the prompt. */
  get text(): string {
    return JSON.stringify(this.jsonSchema);
  }

  /**
   * Checks a candidate answer. A string is the answer's JSON text when it parses (FINAL written as
   * text, `FINAL(JSON.stringify(x))`), else the answer itself. `nullsAsAbsent` reads nulls of
   * optional properties as absent, as replies in the strict form send them.
   */
  check(candidate: unknown, options: { nullsAsAbsent?: boolean } = {}): CheckedAnswer {
    const direct = this.#validate(candidate, options);
    if ('value' in direct || typeof candidate !== 'string') return direct;
    const parsed = parseJson(candidate);
    if ('error' in parsed) return { problems: [`the answer is not JSON (${parsed.error})`] };
    return this.#validate(parsed.value, options);
  }

  #validate(value: unknown, { nullsAsAbsent }: { nullsAsAbsent?: boolean }): CheckedAnswer {
    const parsed = this.zod.safeParse(nullsAsAbsent && this.strictSchema ? dropNullOptionals(this.jsonSchema, value) : value);
    if (!parsed.success) return { problems: problemsOf(parsed.error.issues) };
    const json = JSON.stringify(parsed.data);
    if (json === undefined) return { problems: ['the answer has no JSON form (undefined)'] };
    return { value: parsed.data, json };
  }
}

/** The schema of `completion({ output })`, checked up front: a schema that cannot be used is a ConfigurationError. */
export function outputSchemaOf(spec: unknown): OutputSchema | undefined {
  return spec === undefined ? undefined : new OutputSchema(spec);
}

/** Each problem as `path: message` (`parties.2.signed: expected string, received null`), at most LISTED_PROBLEMS of them. */
export function problemsOf(issues: readonly z.core.$ZodIssue[]): string[] {
  const listed = issues.slice(0, LISTED_PROBLEMS).map((issue) => clip(`${issue.path.map(String).join('.') || '(the answer)'}: ${issueText(issue.message)}`, PROBLEM_CHARS));
  const more = issues.length - listed.length;
  if (more > 0) listed.push(`and ${more.toLocaleString('en-US')} more`);
  return listed;
}

function issueText(message: string): string {
  const text = message.replace(/^Invalid input: /, '');
  const missing = /^expected (.+), received undefined$/.exec(text);
  return missing ? `missing (expected ${missing[1]})` : text;
}

function requireJsonSchema(spec: unknown): JsonSchema {
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) {
    throw new ConfigurationError(`output must be a zod schema or a JSON Schema object, got ${spec === null ? 'null' : Array.isArray(spec) ? 'an array' : typeof spec}.`);
  }
  return spec as JsonSchema;
}

function zodOf(jsonSchema: JsonSchema): z.ZodType {
  try {
    return z.fromJSONSchema(jsonSchema as Parameters<typeof z.fromJSONSchema>[0]);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new ConfigurationError(`The output JSON Schema cannot be used: ${reason}. Fix the schema, or give a zod schema instead.`, { cause: error });
  }
}

function strictFormOf(jsonSchema: JsonSchema): JsonSchema | undefined {
  try {
    return toStrictSchema(jsonSchema, 'final_answer');
  } catch {
    return undefined; // the answer is then asked for in the prompt only
  }
}

function withoutDialect(schema: JsonSchema): JsonSchema {
  const { $schema: _dialect, ...rest } = schema;
  return rest;
}

function parseJson(text: string): { value: unknown } | { error: string } {
  try {
    return { value: JSON.parse(text) };
  } catch (error) {
    return { error: (error as Error).message };
  }
}
