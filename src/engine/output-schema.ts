// The schema a caller gives for the final answer (`completion({ output })`), as a zod 4 schema or a
// JSON Schema object. Both forms end as one zod schema, the caller's own, which the host applies to
// the answer that ends a turn. FINAL in a block is checked in the sandbox worker instead, against the
// schema's JSON Schema form (`blockSchema`): model code can loop it, and its cost must be the run's,
// never the host's. Both report problems with the same formatter (schema-problems.ts).
import { z } from 'zod';
import { ConfigurationError } from '../errors.js';
import { problemsOf } from '../sandbox/schema-problems.js';
import { dropNullOptionals, isZodSchema, toStrictSchema, type JsonSchema } from '../tools/schema.js';

/** What `output` may be: a zod schema, or a JSON Schema object. */
export type OutputSchemaSpec = z.ZodType | Record<string, unknown>;

/** A checked answer: the value the schema produced and its JSON text; or why it does not match. */
export type CheckedAnswer = { value: unknown; json: string } | { problems: string[] };

export class OutputSchema {
  readonly zod: z.ZodType;
  /** The schema as JSON Schema (what the model must produce: the input side of a zod schema). */
  readonly jsonSchema: JsonSchema;
  /** The form OpenAI's strict structured output accepts; undefined when the schema has none. */
  readonly strictSchema: JsonSchema | undefined;
  /**
   * The JSON Schema the sandbox worker checks FINAL values against; undefined when zod cannot read
   * the JSON Schema form back (FINAL in a block is then checked only when its turn ends).
   */
  readonly blockSchema: JsonSchema | undefined;

  constructor(spec: unknown) {
    if (isZodSchema(spec)) {
      this.zod = spec;
      this.jsonSchema = withoutDialect(z.toJSONSchema(spec, { io: 'input', unrepresentable: 'any' }) as JsonSchema);
      this.blockSchema = readsBack(this.jsonSchema) ? this.jsonSchema : undefined;
    } else {
      this.jsonSchema = withoutDialect(requireJsonSchema(spec));
      this.zod = zodOf(this.jsonSchema);
      this.blockSchema = this.jsonSchema;
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

/**
 * Checks that `spec` can be the `output` of a completion (a zod schema, or a JSON Schema zod can
 * read), without running anything: a ConfigurationError says what is wrong. For callers that take
 * a schema from a file or a request and want to refuse a bad one before any model call.
 */
export function checkOutputSchema(spec: unknown): asserts spec is OutputSchemaSpec {
  new OutputSchema(spec);
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

/** Whether zod can build a validator from the JSON Schema (as the sandbox worker does). */
function readsBack(jsonSchema: JsonSchema): boolean {
  try {
    z.fromJSONSchema(jsonSchema as Parameters<typeof z.fromJSONSchema>[0]);
    return true;
  } catch {
    return false;
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
