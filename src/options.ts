import type { z } from 'zod';
import { ConfigurationError } from './errors.js';

/**
 * Validates an options object and names every problem with the expected value and what was given:
 * `Invalid Sandbox options: memoryLimitMb: expected a number >= 16, got 4`.
 */
export function parseOptions<Schema extends z.ZodType>(schema: Schema, value: unknown, label: string): z.output<Schema> {
  const result = schema.safeParse(value ?? {});
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => {
    const path = issue.path.join('.');
    const given = path ? readPath(value, issue.path) : value;
    return `${path || '(options)'}: ${issue.message}, got ${describeGiven(given)}`;
  });
  throw new ConfigurationError(`Invalid ${label}: ${problems.join('; ')}`);
}

function readPath(value: unknown, path: PropertyKey[]): unknown {
  let current = value;
  for (const key of path) current = current !== null && typeof current === 'object' ? (current as Record<PropertyKey, unknown>)[key] : undefined;
  return current;
}

function describeGiven(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value);
  if (typeof value === 'function') return 'a function';
  if (Array.isArray(value)) return 'an array';
  if (value !== null && typeof value === 'object') return 'an object';
  return String(value);
}
