import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

// The shape rules the code keeps so it stays easy to change: short functions, and imports that
// never go round in a circle. A failure names each offender.

const root = resolve(import.meta.dirname, '..');
const FOLDERS = ['src', 'sandbox'];
const MAX_FUNCTION_LINES = 60;

function sourceFiles(folder: string): string[] {
  return readdirSync(join(root, folder), { recursive: true, encoding: 'utf8' })
    .filter((path) => path.endsWith('.ts') && !path.endsWith('.d.ts'))
    .map((path) => join(folder, path));
}

const files = FOLDERS.flatMap(sourceFiles);
const parsed = new Map(files.map((file) => [file, ts.createSourceFile(file, readFileSync(join(root, file), 'utf8'), ts.ScriptTarget.Latest, true)]));

function longFunctions(file: string, source: ts.SourceFile): string[] {
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const lines = end - start + 1;
      if (lines > MAX_FUNCTION_LINES) found.push(`${file}:${start + 1} ${functionName(node)} (${lines} lines)`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function functionName(node: ts.Node): string {
  const named = node as { name?: ts.Node };
  if (named.name && ts.isIdentifier(named.name)) return named.name.text;
  if (ts.isVariableDeclaration(node.parent) && ts.isIdentifier(node.parent.name)) return node.parent.name.text;
  return '(anonymous)';
}

/** Relative imports of a file (type-only ones too: they tie the modules as much), as repository paths. */
function importsOf(file: string, source: ts.SourceFile): string[] {
  const targets: string[] = [];
  for (const statement of source.statements) {
    if (!(ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement)) || !statement.moduleSpecifier) continue;
    const specifier = (statement.moduleSpecifier as ts.StringLiteral).text;
    if (!specifier.startsWith('.')) continue;
    const target = relative(root, resolve(root, dirname(file), specifier)).replace(/\.js$/, '.ts');
    if (parsed.has(target)) targets.push(target);
  }
  return targets;
}

function importCycles(): string[][] {
  const graph = new Map([...parsed].map(([file, source]) => [file, importsOf(file, source)]));
  const cycles: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (file: string) => {
    state.set(file, 'open');
    stack.push(file);
    for (const next of graph.get(file) ?? []) {
      if (state.get(next) === 'open') cycles.push([...stack.slice(stack.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(file, 'done');
  };
  for (const file of graph.keys()) if (!state.has(file)) visit(file);
  return cycles;
}

/** Where each folder's modules may import from (ARCHITECTURE.md, "What may import what"). */
const SHARED = 'src/*.ts';
const MAY_IMPORT: Record<string, string[]> = {
  'src/cli': ['src/index.ts', 'src/testing.ts', 'src/queue.ts', 'src/view', 'src/tools', 'src/sandbox', 'src/inputs', SHARED],
  'src/batch': ['src/api', 'src/engine', 'src/lm', 'src/tools', 'src/inputs', SHARED],
  'src/server': ['src/api', 'src/engine', 'src/lm', SHARED],
  'src/api': ['src/engine', 'src/lm', SHARED],
  'src/testing': ['src/engine', 'src/lm', SHARED],
  'src/engine': ['src/lm', 'src/sandbox', 'src/tools', SHARED],
  'src/tools': ['src/lm', 'src/sandbox', SHARED],
  'src/inputs': ['src/sandbox', SHARED],
  'src/sandbox': [SHARED],
  'src/lm': [SHARED],
  'src/view': [SHARED],
  sandbox: ['src/sandbox/shared.ts', 'src/lm/tool-text.ts'],
};

/** The public entry points: a layer may import one only when its line names it. */
const ENTRY_POINTS = ['src/index.ts', 'src/testing.ts', 'src/queue.ts'];

/** The layer a file belongs to: its folder under src/, `sandbox`, or src/*.ts for the shared modules. */
function layerOf(file: string): string {
  const parts = file.split('/');
  if (parts[0] === 'sandbox') return 'sandbox';
  return parts.length > 2 ? `${parts[0]}/${parts[1]}` : SHARED;
}

function importsAgainstLayers(): string[] {
  const found: string[] = [];
  for (const [file, source] of parsed) {
    const allowed = MAY_IMPORT[layerOf(file)];
    if (!allowed) continue; // src/index.ts, src/testing.ts and the shared modules themselves
    for (const target of importsOf(file, source)) {
      const layer = layerOf(target);
      if (layer === layerOf(file) || allowed.includes(target) || (layer !== SHARED && allowed.includes(layer))) continue;
      if (layer === SHARED && allowed.includes(SHARED) && !ENTRY_POINTS.includes(target)) continue;
      found.push(`${file} -> ${target}`);
    }
  }
  return found;
}

describe('the shape of the code', () => {
  it(`has no function over ${MAX_FUNCTION_LINES} lines in ${FOLDERS.join(' or ')}`, () => {
    expect(files.length).toBeGreaterThan(50);
    expect([...parsed].flatMap(([file, source]) => longFunctions(file, source))).toEqual([]);
  });

  it('imports only down the layers', () => {
    expect(importsAgainstLayers()).toEqual([]);
  });

  it('has no import cycles', () => {
    expect(importCycles().map((cycle) => cycle.join(' -> '))).toEqual([]);
  });
});
