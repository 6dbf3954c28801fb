import { parse, type Node } from 'acorn';
import { RlmError } from '../errors.js';
import { BLOCK_HOOK } from './shared.js';

/**
 * Turns a model-written block into a script that behaves like a REPL cell.
 *
 * Separately compiled scripts share top-level `let`/`const`/`class`, but declaring the same name
 * again in a later script throws, and models re-declare constantly. Node's REPL solves this by
 * rewriting top-level declarations; so do we:
 *
 * - every block runs inside `(async () => { ... })()`, so top-level `await` works everywhere and a
 *   thrown error (sync or async) arrives as the rejection of one promise, handed to the prelude;
 * - top-level declarations become assignments to globals declared with `var` before the wrapper,
 *   so they persist, can be declared again, and survive a later throw in the same block;
 * - top-level function declarations stay hoisted inside the wrapper and are copied to globals
 *   before the first statement runs;
 * - a trailing expression statement becomes the wrapper's return value (shown like a notebook cell).
 *
 * Every edit keeps the text on its original line, so stack traces point at the model's lines.
 */
export interface RewrittenBlock {
  code: string;
  /** The block ends in an expression whose value should be shown. */
  hasResult: boolean;
  /** The line holding the wrapper's closing call (one past the model's last line). */
  wrapperLine: number;
  /**
   * Where the rewrite moved text sideways: `[line, column, shift]` means that on `line`, text from
   * (0-based) `column` of the rewritten code on stands `shift` characters right of where the model
   * wrote it. Stack traces are mapped back with it.
   */
  columnShifts: [number, number, number][];
}

/** A block that does not parse; the model sees it as a SyntaxError with the offending line. */
export class BlockSyntaxError extends RlmError {
  override readonly name = 'SyntaxError';
  constructor(
    message: string,
    readonly line: number,
    readonly column: number,
    readonly frame: string,
  ) {
    super('block_syntax_error', message);
  }
}

interface Edit {
  at: number;
  /** Characters removed starting at `at`. */
  remove: number;
  insert: string;
  /** Goes before every other edit at the same offset. */
  first?: boolean;
}

type AnyNode = Node & Record<string, unknown>;


const FUNCTION_TYPES = new Set(['FunctionDeclaration', 'FunctionExpression', 'ArrowFunctionExpression']);
const CLASS_TYPES = new Set(['ClassDeclaration', 'ClassExpression']);
const STATEMENT_LISTS = new Set(['Program', 'BlockStatement', 'SwitchCase', 'StaticBlock']);

export function rewriteBlock(source: string): RewrittenBlock {
  const program = parseBlock(source) as AnyNode;
  const statements = program.body as unknown as AnyNode[];
  const rewriter = new CellRewriter(source, program);
  statements.forEach((statement, index) => rewriter.statement(statement, index === statements.length - 1));
  return rewriter.finish(statements[statements.length - 1]?.type === 'ExpressionStatement');
}

/** Collects the edits that turn one block's top-level statements into a REPL cell. */
class CellRewriter {
  private readonly edits: Edit[] = [];
  private readonly hoisted = new Set<string>();
  private readonly functionNames: string[] = [];

  constructor(
    private readonly source: string,
    private readonly program: AnyNode,
  ) {}

  statement(statement: AnyNode, isLast: boolean): void {
    switch (statement.type) {
      case 'VariableDeclaration':
        this.declaration(statement, this.program);
        break;
      case 'ClassDeclaration': {
        const name = (statement.id as AnyNode).name as string;
        this.hoisted.add(name);
        this.edits.push({ at: statement.start, remove: 0, insert: `${name} = ` });
        this.edits.push({ at: statement.end, remove: 0, insert: ';' });
        break;
      }
      case 'FunctionDeclaration': {
        const name = (statement.id as AnyNode).name as string;
        this.hoisted.add(name);
        this.functionNames.push(name);
        break;
      }
      case 'ExpressionStatement':
        if (isLast) {
          const expression = statement.expression as AnyNode;
          this.edits.push({ at: expression.start, remove: 0, insert: 'return (' });
          this.edits.push({ at: expression.end, remove: 0, insert: ')' });
        }
        break;
      default:
        this.nestedVars(statement, this.program);
    }
  }

  /**
   * `const a = 1, {b} = c;` becomes `;(a = 1, {b} = c);`. The leading `;` guards against the
   * previous line running on (`f()\n(a = 1)` would be a call); it is only valid where a statement
   * may start, so heads of `for` loops and bodies of `if` without braces get the bare parenthesis.
   */
  private declaration(declaration: AnyNode, parent: AnyNode): void {
    const kind = declaration.kind as string;
    const declarators = declaration.declarations as AnyNode[];
    for (const declarator of declarators) for (const name of boundNames(declarator.id as AnyNode)) this.hoisted.add(name);
    if ((parent.type === 'ForInStatement' || parent.type === 'ForOfStatement') && parent.left === declaration) {
      // `for (const x of xs)` becomes `for (x of xs)`.
      this.edits.push({ at: declaration.start, remove: kind.length, insert: '' });
      return;
    }
    const inStatementList = STATEMENT_LISTS.has(parent.type);
    this.edits.push({ at: declaration.start, remove: kind.length, insert: inStatementList ? ';(' : '(' });
    for (const declarator of declarators) {
      // A repeated `var x;` must not reset x; a repeated `let x;` starts over as undefined.
      if (declarator.init == null && kind !== 'var') this.edits.push({ at: declarator.end, remove: 0, insert: ' = void 0' });
    }
    const endsWithSemicolon = this.source[declaration.end - 1] === ';';
    this.edits.push({ at: endsWithSemicolon ? declaration.end - 1 : declaration.end, remove: 0, insert: ')' });
  }

  /** `var` declarations anywhere outside functions are global in a script: keep them global. */
  private nestedVars(node: AnyNode, parent: AnyNode): void {
    if (FUNCTION_TYPES.has(node.type) || CLASS_TYPES.has(node.type)) return;
    if (node.type === 'VariableDeclaration' && node.kind === 'var') {
      this.declaration(node, parent);
      return;
    }
    for (const child of childNodes(node)) this.nestedVars(child, node);
  }

  finish(hasResult: boolean): RewrittenBlock {
    const declarations = this.hoisted.size > 0 ? `var ${[...this.hoisted].join(', ')}; ` : '';
    // Arrow functions see the script's `this`, which is always the real global object.
    const exports = this.functionNames.map((name) => `this[${JSON.stringify(name)}] = ${name}; `).join('');
    this.edits.push({ at: 0, remove: 0, insert: `${declarations}${BLOCK_HOOK}((async () => { ${exports}`, first: true });
    const { text, columnShifts } = applyEdits(this.source, this.edits);
    return { code: `${text}\n})())`, hasResult, wrapperLine: this.source.split('\n').length + 1, columnShifts };
  }
}

/** Throws a BlockSyntaxError (line, column, code frame) when `source` does not parse as a block. */
export function checkBlockSyntax(source: string): void {
  parseBlock(source);
}

function parseBlock(source: string): Node {
  try {
    return parse(source, {
      ecmaVersion: 'latest',
      sourceType: 'script',
      allowAwaitOutsideFunction: true,
      allowHashBang: true,
    });
  } catch (error) {
    const { loc, message } = error as { loc?: { line: number; column: number }; message: string };
    if (!loc) throw error;
    throw new BlockSyntaxError(message, loc.line, loc.column, codeFrame(source, loc.line, loc.column));
  }
}

/** Two lines of context and a caret under the column, like most compilers print. */
export function codeFrame(source: string, line: number, column: number): string {
  const lines = source.split('\n');
  const first = Math.max(1, line - 2);
  const width = String(line).length;
  const out: string[] = [];
  for (let number = first; number <= line && number <= lines.length; number++) {
    out.push(`${String(number).padStart(width)} | ${lines[number - 1]}`);
  }
  out.push(`${' '.repeat(width)} | ${' '.repeat(column)}^`);
  return out.join('\n');
}

function applyEdits(source: string, edits: Edit[]): { text: string; columnShifts: [number, number, number][] } {
  // Stable sort: two insertions at the same offset keep the order they were made in.
  const ordered = edits
    .map((edit, order) => ({ ...edit, order: edit.first ? -1 : order }))
    .sort((a, b) => a.at - b.at || a.order - b.order);
  const columnShifts: [number, number, number][] = [];
  let text = '';
  let cursor = 0;
  let line = 1;
  let lineStart = 0; // offset in `text` where the current line starts
  let shift = 0; // characters the current line has moved right so far
  const advanceTo = (offset: number) => {
    const chunk = source.slice(cursor, offset);
    const lastNewline = chunk.lastIndexOf('\n');
    if (lastNewline >= 0) {
      line += chunk.split('\n').length - 1;
      lineStart = text.length + lastNewline + 1;
      shift = 0;
    }
    text += chunk;
    cursor = Math.max(cursor, offset);
  };
  for (const edit of ordered) {
    advanceTo(edit.at);
    text += edit.insert;
    cursor = Math.max(cursor, edit.at + edit.remove);
    shift += edit.insert.length - edit.remove;
    columnShifts.push([line, text.length - lineStart, shift]);
  }
  advanceTo(source.length);
  return { text, columnShifts };
}

function childNodes(node: AnyNode): AnyNode[] {
  const children: AnyNode[] = [];
  for (const key of Object.keys(node)) {
    if (key === 'loc' || key === 'range') continue;
    const value = node[key];
    if (Array.isArray(value)) {
      for (const item of value) if (isNode(item)) children.push(item);
    } else if (isNode(value)) {
      children.push(value);
    }
  }
  return children;
}

function isNode(value: unknown): value is AnyNode {
  return typeof value === 'object' && value !== null && typeof (value as { type?: unknown }).type === 'string';
}

/** Names bound by a declaration pattern: `a`, `{ b, c: [d] }`, `...rest`, `e = 1`. */
function boundNames(pattern: AnyNode): string[] {
  switch (pattern.type) {
    case 'Identifier':
      return [pattern.name as string];
    case 'ObjectPattern':
      return (pattern.properties as AnyNode[]).flatMap((property) =>
        boundNames((property.type === 'RestElement' ? property.argument : property.value) as AnyNode),
      );
    case 'ArrayPattern':
      return (pattern.elements as (AnyNode | null)[]).flatMap((element) => (element ? boundNames(element) : []));
    case 'RestElement':
      return boundNames(pattern.argument as AnyNode);
    case 'AssignmentPattern':
      return boundNames(pattern.left as AnyNode);
    default:
      return [];
  }
}
