import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigurationError, defineTool } from '../../src/index.js';
import { ToolRegistry } from '../../src/tools/registry.js';
import { thrownBy } from '../rejection.js';

const noop = () => 'ok';

describe('defineTool', () => {
  it('checks names against OpenAI’s rules at definition', () => {
    expect(defineTool({ name: 'get_stats-2', execute: noop }).name).toBe('get_stats-2');
    for (const bad of ['has space', 'dots.are.bad', '', 'x'.repeat(65), 'ünïcode']) {
      const refused = thrownBy(() => defineTool({ name: bad, execute: noop }), ConfigurationError);
      expect(refused, bad).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/Invalid tool name .* 1 to 64 letters, digits, underscores or hyphens/) });
    }
    expect(defineTool({ name: 'x'.repeat(64), execute: noop }).name).toHaveLength(64);
  });

  it('turns a zod schema into an OpenAI function definition and types execute from it', async () => {
    const tool = defineTool({
      name: 'search',
      description: 'Search records',
      parameters: z.object({ query: z.string().describe('what to look for'), limit: z.number().int().optional() }),
      execute: ({ query, limit }) => `${query.toUpperCase()}:${limit ?? 'all'}`,
    });
    expect(tool.spec).toEqual({
      type: 'function',
      function: {
        name: 'search',
        description: 'Search records',
        parameters: {
          type: 'object',
          properties: { query: { type: 'string', description: 'what to look for' }, limit: { type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 } },
          required: ['query'],
        },
      },
    });
    expect(await tool.execute({ query: 'a' }, { callId: 'c', invocationId: 'i', signal: new AbortController().signal })).toBe('A:all');
  });

  it('accepts JSON Schema parameters and validates with them', () => {
    const tool = defineTool({
      name: 'get_stats',
      parameters: { type: 'object', properties: { question_id: { type: 'string' } }, required: ['question_id'], additionalProperties: false },
      execute: noop,
    });
    expect(tool.validate({ question_id: 'q1' })).toEqual({ ok: true, value: { question_id: 'q1' } });
    const bad = tool.validate({ question_id: 3 });
    expect(bad.ok).toBe(false);
    expect(!bad.ok && bad.message).toMatch(/^Invalid arguments for get_stats: question_id: expected string, received number/);
  });

  it('explains nested validation problems with their paths', () => {
    const tool = defineTool({
      name: 'filter',
      parameters: z.object({ filters: z.array(z.object({ field: z.string(), value: z.number() })), mode: z.enum(['and', 'or']) }),
      execute: noop,
    });
    const result = tool.validate({ filters: [{ field: 'a', value: 1 }, { field: 2 }] });
    expect(result.ok).toBe(false);
    const message = !result.ok ? result.message : '';
    expect(message).toContain('filters.1.field: expected string, received number');
    expect(message).toContain('filters.1.value: required');
    expect(message).toContain('mode: required');
    expect(message).toContain('Fix the arguments and call filter again.');
  });

  it('gives a tool without parameters an empty object schema', () => {
    expect(defineTool({ name: 'now', execute: noop }).spec.function.parameters).toEqual({ type: 'object', properties: {} });
    expect(defineTool({ name: 'now', strict: true, execute: noop }).spec.function.parameters).toEqual({
      type: 'object',
      properties: {},
      required: [],
      additionalProperties: false,
    });
  });
});

describe('strict schemas', () => {
  const strict = (parameters: z.ZodType | Record<string, unknown>) =>
    defineTool({ name: 'tool', strict: true, parameters: parameters as z.ZodType, execute: noop }).spec.function;

  it('requires every property and makes optional ones nullable', () => {
    const fn = strict(z.object({ a: z.string(), b: z.number().optional(), c: z.enum(['x', 'y']).optional() }));
    expect(fn.strict).toBe(true);
    expect(fn.parameters).toMatchObject({
      required: ['a', 'b', 'c'],
      additionalProperties: false,
      properties: { a: { type: 'string' }, b: { type: ['number', 'null'] }, c: { type: ['string', 'null'], enum: ['x', 'y', null] } },
    });
  });

  it('closes every nested object with additionalProperties: false', () => {
    const fn = strict(z.object({ outer: z.object({ inner: z.object({ leaf: z.boolean() }) }), list: z.array(z.object({ id: z.string() })) }));
    const parameters = fn.parameters as Record<string, any>;
    expect(parameters.properties.outer.additionalProperties).toBe(false);
    expect(parameters.properties.outer.properties.inner.additionalProperties).toBe(false);
    expect(parameters.properties.list.items.additionalProperties).toBe(false);
    expect(parameters.properties.list.items.required).toEqual(['id']);
  });

  it('maps null back to absent for optional fields before validation', () => {
    const tool = defineTool({ name: 'tool', strict: true, parameters: z.object({ a: z.string(), b: z.number().optional(), nested: z.object({ c: z.string().optional() }) }), execute: noop });
    expect(tool.validate({ a: 'x', b: null, nested: { c: null } })).toEqual({ ok: true, value: { a: 'x', nested: {} } });
    // A required field is still required: null there is an error.
    expect(tool.validate({ a: null, b: 1, nested: {} }).ok).toBe(false);
  });

  it('inlines references and keeps recursive ones as #/$defs', () => {
    const flat = strict({
      type: 'object',
      properties: { home: { $ref: '#/definitions/Address' }, work: { $ref: '#/$defs/Address' } },
      required: ['home', 'work'],
      definitions: { Address: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
      $defs: { Address: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
    }).parameters as Record<string, any>;
    expect(JSON.stringify(flat)).not.toContain('$ref');
    expect(flat.$defs).toBeUndefined();
    expect(flat.properties.home).toEqual({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false });

    const recursive = strict({
      type: 'object',
      properties: { root: { $ref: '#/$defs/Node' } },
      required: ['root'],
      $defs: { Node: { type: 'object', properties: { name: { type: 'string' }, children: { type: 'array', items: { $ref: '#/$defs/Node' } } }, required: ['name', 'children'] } },
    }).parameters as Record<string, any>;
    expect(recursive.properties.root.properties.children.items).toEqual({ $ref: '#/$defs/Node' });
    expect(recursive.$defs.Node.additionalProperties).toBe(false);
  });

  it('rejects keywords OpenAI does not accept, naming the keyword and the tool', () => {
    expect(thrownBy(() => strict(z.object({ name: z.string().min(3) })), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/Tool "tool": the JSON Schema keyword "minLength" \(at parameters.name\) is not supported/) });
    expect(thrownBy(() => strict({ type: 'object', properties: { tags: { type: 'array', items: { type: 'string' }, uniqueItems: true } } }), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/"uniqueItems"/) });
    expect(thrownBy(() => strict({ type: 'object', properties: { a: { allOf: [{ type: 'string' }] } } }), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/"allOf"/) });
    expect(thrownBy(() => strict(z.object({ counts: z.record(z.string(), z.number()) })), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/"propertyNames"|additionalProperties .* not supported/) });
    expect(thrownBy(() => strict({ type: 'object', properties: { counts: { type: 'object', additionalProperties: { type: 'number' } } } }), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/open or typed additionalProperties \(at parameters.counts/) });
    expect(thrownBy(() => strict({ type: 'object', properties: { x: { $ref: 'https://example.com/schema.json' } } }), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/cannot be resolved/) });
  });

  it('moves defaults into the description', () => {
    const fn = strict(z.object({ unit: z.enum(['c', 'f']).default('c').describe('Temperature unit') }));
    expect((fn.parameters as Record<string, any>).properties.unit.description).toBe('Temperature unit Default: "c".');
  });
});

describe('ToolRegistry', () => {
  const a = defineTool({ name: 'a', execute: noop });
  const b = defineTool({ name: 'b', execute: noop });

  it('registers, finds and lists tools, and refuses duplicates', () => {
    const registry = new ToolRegistry([a, b]);
    expect(registry.has('a')).toBe(true);
    expect(registry.get('b')).toBe(b);
    expect(registry.get('c')).toBeUndefined();
    expect(registry.names()).toEqual(['a', 'b']);
    expect(thrownBy(() => registry.register(defineTool({ name: 'a', execute: noop })), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringContaining('A tool named "a" is already registered') });
  });

  it('returns definitions for all tools or a subset', () => {
    const registry = new ToolRegistry([a, b]);
    expect(registry.definitions().map((spec) => spec.function.name)).toEqual(['a', 'b']);
    expect(registry.definitions(['b'])).toEqual([b.spec]);
    expect(thrownBy(() => registry.definitions(['zzz']), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringContaining('No tool named "zzz". Registered tools: a, b.') });
  });
});
