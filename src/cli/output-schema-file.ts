import { readFileSync, statSync } from 'node:fs';
import { extname, resolve } from 'node:path';
import { checkOutputSchema, RlmError, type OutputSchemaSpec } from '../index.js';
import { importModuleFile } from '../tools/setup-files.js';
import { UsageError } from './usage-error.js';

const MODULE_EXTENSIONS = new Set(['.ts', '.mts', '.cts', '.js', '.mjs', '.cjs']);

/**
 * The schema of `--output-schema FILE`: a JSON Schema in a `.json` file, or a TypeScript or
 * JavaScript module exporting `schema` (zod or JSON Schema), loaded as setup files are. It is read
 * and checked before any model call: whatever is wrong with it is a usage error naming the file.
 * Returns the schema as the file gives it, for `completion({ output })`.
 */
export async function loadOutputSchemaFile(file: string): Promise<OutputSchemaSpec> {
  const path = resolve(file);
  const problem = (reason: string) => new UsageError(`--output-schema ${file}: ${reason}`);
  try {
    if (!statSync(path).isFile()) throw new Error('not a file');
  } catch (error) {
    throw problem(`${(error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (error as Error).message}.`);
  }
  const extension = extname(path).toLowerCase();
  let spec: unknown;
  if (extension === '.json') {
    spec = parseJsonFile(path, problem);
  } else if (MODULE_EXTENSIONS.has(extension)) {
    spec = await schemaExport(path, problem);
  } else {
    throw problem('expected a JSON Schema in a .json file, or a .ts or .js module that exports `schema`.');
  }
  try {
    checkOutputSchema(spec);
    return spec;
  } catch (error) {
    if (error instanceof RlmError) throw problem(error.message);
    throw error;
  }
}

function parseJsonFile(path: string, problem: (reason: string) => UsageError): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as unknown;
  } catch (error) {
    throw problem(`not valid JSON (${(error as Error).message}).`);
  }
}

async function schemaExport(path: string, problem: (reason: string) => UsageError): Promise<unknown> {
  let module: Record<string, unknown>;
  try {
    module = await importModuleFile(path, 'Output schema file');
  } catch (error) {
    if (error instanceof RlmError) throw problem(error.message);
    throw error;
  }
  const fallback = module.default as Record<string, unknown> | undefined;
  const schema = module.schema ?? (fallback !== null && typeof fallback === 'object' ? fallback.schema : undefined);
  if (schema === undefined) throw problem('the module exports no `schema`: export the zod schema or JSON Schema as `export const schema = ...`.');
  return schema;
}
