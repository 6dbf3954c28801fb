import { describe, expect, it } from 'vitest';
import { BlockSyntaxError, rewriteBlock } from '../../src/sandbox/rewrite.js';

describe('rewriteBlock', () => {
  it('turns top-level declarations into assignments to hoisted globals', () => {
    const { code } = rewriteBlock('const a = 1, {b, c: [d]} = obj;\nlet e;\nclass K {}\nfunction f() {}');
    expect(code.startsWith('var a, b, d, e, K, f; ')).toBe(true);
    expect(code).toContain(';( a = 1, {b, c: [d]} = obj);');
    expect(code).toContain(';( e = void 0);');
    expect(code).toContain('K = class K {};');
    expect(code).toContain('this["f"] = f;');
  });

  it('keeps every line of the model code on its original line', () => {
    const source = 'const a = 1\nfoo()\nconst b = {\n  x: 1,\n}\nthrow new Error("line 6")';
    const { code, wrapperLine } = rewriteBlock(source);
    const lines = code.split('\n');
    expect(lines[5]).toContain('throw new Error("line 6")');
    expect(lines[3]).toBe('  x: 1,');
    expect(wrapperLine).toBe(7);
  });

  it('guards a converted declaration against the previous line running on', () => {
    const { code } = rewriteBlock('f()\nconst a = 1');
    // Without the leading semicolon this would parse as f()(a = 1).
    expect(code).toContain('f()\n;( a = 1)');
  });

  it('hoists var declarations in loops and blocks but leaves function scopes alone', () => {
    const { code } = rewriteBlock('for (var i = 0; i < 3; i++) {}\nfor (var k of [1]) {}\nif (x) var y = 2;\nfunction g() { var local = 1 }');
    expect(code.startsWith('var i, k, y, g; ')).toBe(true);
    expect(code).toContain('for (( i = 0); i < 3; i++)');
    expect(code).toContain('for ( k of [1])');
    expect(code).toContain('if (x) ( y = 2);');
    expect(code).toContain('var local = 1');
  });

  it('returns a trailing expression and reports that the block has a result', () => {
    expect(rewriteBlock('const a = 1\na + 1').hasResult).toBe(true);
    expect(rewriteBlock('const a = 1\na + 1').code).toContain('return (a + 1)');
    expect(rewriteBlock('const a = 1').hasResult).toBe(false);
    expect(rewriteBlock('if (a) { 1 }').hasResult).toBe(false);
  });

  it('reports syntax errors with the position and a code frame', () => {
    let caught: unknown;
    try {
      rewriteBlock('const ok = 1;\nlet = = 3');
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(BlockSyntaxError);
    const error = caught as BlockSyntaxError;
    expect(error.line).toBe(2);
    expect(error.frame).toContain('2 | let = = 3');
    expect(error.frame).toMatch(/\|\s+\^/);
  });

  it('accepts top-level await', () => {
    expect(() => rewriteBlock('const x = await Promise.resolve(1)')).not.toThrow();
  });
});
