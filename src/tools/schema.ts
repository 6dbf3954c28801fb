import { z } from 'zod';
import { ConfigurationError } from '../errors.js';

export type JsonSchema = Record<string, unknown>;

/** What OpenAI's strict mode rejects; a strict tool using one of these fails at definition. */
const UNSUPPORTED_IN_STRICT = [
  'allOf',
  'not',
  'if',
  'then',
  'else',
  'dependentRequired',
  'dependentSchemas',
  'patternProperties',
  'propertyNames',
  'unevaluatedProperties',
  'unevaluatedItems',
  'minProperties',
  'maxProperties',
  'contains',
  'minContains',
  'maxContains',
  'uniqueItems',
  'minLength',
  'maxLength',
  'contentEncoding',
  'contentMediaType',
];

const EMPTY_OBJECT: JsonSchema = { type: 'object', properties: {}, required: [], additionalProperties: false };

export function isZodSchema(value: unknown): value is z.ZodType {
  return typeof value === 'object' && value !== null && '_zod' in value && typeof (value as z.ZodType).safeParse === 'function';
}

/** JSON Schema for a tool's parameters: zod schemas through zod's own converter (input side). */
export function parametersJsonSchema(parameters: unknown): JsonSchema {
  if (parameters === undefined || parameters === null) return { type: 'object', properties: {} };
  const schema = isZodSchema(parameters) ? (z.toJSONSchema(parameters, { io: 'input', unrepresentable: 'any' }) as JsonSchema) : (parameters as JsonSchema);
  const { $schema: _ignored, ...rest } = schema;
  return rest;
}

/**
 * Rewrites a parameters schema into the form OpenAI's strict mode accepts: every property
 * required (optional ones become nullable; the executor maps null back to "absent"), every object
 * closed with `additionalProperties: false`, references inlined (recursive ones kept as
 * `#/$defs/...`), defaults moved into descriptions, and unsupported keywords rejected by name.
 */
export function toStrictSchema(schema: JsonSchema, toolName: string): JsonSchema {
  if (Object.keys(schema).length === 0 || (schema.type === 'object' && !schema.properties)) return { ...EMPTY_OBJECT };
  const resolved = inlineReferences(schema, toolName);
  if (resolved.type !== 'object') {
    throw new ConfigurationError(`Tool "${toolName}": strict parameters must be an object schema (got ${JSON.stringify(resolved.type ?? 'no type')}).`);
  }
  return strictNode(resolved, toolName, 'parameters');
}

function strictNode(node: JsonSchema, toolName: string, path: string): JsonSchema {
  for (const keyword of UNSUPPORTED_IN_STRICT) {
    if (keyword in node) {
      throw new ConfigurationError(
        `Tool "${toolName}": the JSON Schema keyword "${keyword}" (at ${path}) is not supported by OpenAI's strict mode. Remove it, or define the tool with strict: false.`,
      );
    }
  }
  const out: JsonSchema = { ...node };
  if ('default' in out) {
    const note = `Default: ${JSON.stringify(out.default)}.`;
    out.description = typeof out.description === 'string' ? `${out.description} ${note}` : note;
    delete out.default;
  }
  if (out.oneOf) {
    out.anyOf = out.oneOf;
    delete out.oneOf;
  }
  if (Array.isArray(out.anyOf)) out.anyOf = (out.anyOf as JsonSchema[]).map((entry, index) => strictNode(entry, toolName, `${path}.anyOf[${index}]`));
  if (out.items && typeof out.items === 'object') out.items = strictNode(out.items as JsonSchema, toolName, `${path}.items`);
  if (out.$defs && typeof out.$defs === 'object') {
    out.$defs = Object.fromEntries(Object.entries(out.$defs as Record<string, JsonSchema>).map(([name, def]) => [name, strictNode(def, toolName, `$defs.${name}`)]));
  }
  const isObject = out.type === 'object' || (Array.isArray(out.type) && out.type.includes('object')) || 'properties' in out;
  if (isObject) {
    if (out.additionalProperties !== undefined && out.additionalProperties !== false) {
      throw new ConfigurationError(
        `Tool "${toolName}": an object with open or typed additionalProperties (at ${path}, e.g. a record or map) is not supported by OpenAI's strict mode. Use fixed properties, or strict: false.`,
      );
    }
    const properties = (out.properties ?? {}) as Record<string, JsonSchema>;
    const required = new Set((out.required as string[] | undefined) ?? []);
    out.properties = Object.fromEntries(
      Object.entries(properties).map(([key, value]) => {
        const strict = strictNode(value, toolName, `${path}.${key}`);
        return [key, required.has(key) ? strict : nullable(strict)];
      }),
    );
    out.required = Object.keys(properties);
    out.additionalProperties = false;
  }
  return out;
}

function nullable(schema: JsonSchema): JsonSchema {
  if (typeof schema.type === 'string' && !schema.anyOf) {
    const out: JsonSchema = { ...schema, type: [schema.type, 'null'] };
    if (Array.isArray(schema.enum)) out.enum = [...(schema.enum as unknown[]), null];
    return out;
  }
  if (Array.isArray(schema.type)) return schema.type.includes('null') ? schema : { ...schema, type: [...schema.type, 'null'] };
  return { anyOf: [schema, { type: 'null' }] };
}

/** Inlines `$ref`s to local definitions; references inside their own definition stay as refs. */
export function inlineReferences(schema: JsonSchema, toolName: string): JsonSchema {
  const definitions = { ...((schema.definitions ?? {}) as Record<string, JsonSchema>), ...((schema.$defs ?? {}) as Record<string, JsonSchema>) };
  let keptRecursive = false;
  const visit = (node: unknown, stack: string[]): unknown => {
    if (Array.isArray(node)) return node.map((item) => visit(item, stack));
    if (node === null || typeof node !== 'object') return node;
    const record = node as JsonSchema;
    if (typeof record.$ref === 'string') {
      const match = /^#\/(?:\$defs|definitions)\/(.+)$/.exec(record.$ref);
      if (!match || !definitions[match[1]!]) {
        throw new ConfigurationError(`Tool "${toolName}": the reference ${record.$ref} cannot be resolved; only local #/$defs/ references are supported.`);
      }
      const name = match[1]!;
      if (stack.includes(name)) {
        keptRecursive = true;
        return { ...record, $ref: `#/$defs/${name}` };
      }
      const { $ref: _ref, ...siblings } = record;
      return { ...(visit(definitions[name], [...stack, name]) as JsonSchema), ...siblings };
    }
    const out: JsonSchema = {};
    for (const [key, value] of Object.entries(record)) {
      if (key === '$defs' || key === 'definitions') continue;
      out[key] = visit(value, stack);
    }
    return out;
  };
  const resolved = visit(schema, []) as JsonSchema;
  if (keptRecursive) {
    resolved.$defs = Object.fromEntries(Object.entries(definitions).map(([name, def]) => [name, visit(def, [name])]));
  }
  return resolved;
}

/**
 * Strict mode makes optional properties nullable; a model then sends `null` for "not given".
 * This turns those nulls back into absent properties before validation, guided by the original
 * (non-strict) schema.
 */
export function dropNullOptionals(schema: JsonSchema, value: unknown): unknown {
  if (Array.isArray(value)) {
    const items = schema.items as JsonSchema | undefined;
    return items ? value.map((item) => dropNullOptionals(items, item)) : value;
  }
  if (value === null || typeof value !== 'object' || !schema.properties) return value;
  const properties = schema.properties as Record<string, JsonSchema>;
  const required = new Set((schema.required as string[] | undefined) ?? []);
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
    if (item === null && !required.has(key) && key in properties) continue;
    out[key] = properties[key] ? dropNullOptionals(properties[key], item) : item;
  }
  return out;
}
