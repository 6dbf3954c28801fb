import { z } from 'zod';
import { RlmError } from '../errors.js';
import { defineTool } from './define.js';

/** Evaluates + - * / with parentheses, decimals and unary minus. A real parser: nothing is eval'd. */
export const calculatorTool = defineTool({
  name: 'calculator',
  description: 'Evaluate an arithmetic expression with + - * /, parentheses, decimals and unary minus, e.g. "(2.5 + 3) * -4".',
  parameters: z.object({ expression: z.string().describe('The expression to evaluate') }),
  execute: ({ expression }) => ({ result: evaluate(expression), expression }),
});

/** Returns the message with the ids of its invocation and call (useful for testing tool plumbing). */
export const echoTool = defineTool({
  name: 'echo',
  description: 'Return the message unchanged, with the invocation and call ids.',
  parameters: z.object({ message: z.string() }),
  execute: ({ message }, context) => ({ message, invocation_id: context.invocationId, function_call_id: context.callId }),
});

/** The calculator was given something that is not arithmetic. */
export class ExpressionError extends RlmError {
  override name = 'ExpressionError';
  constructor(message: string) {
    super('invalid_expression', message);
  }
}

/**
 * Recursive descent over this grammar:
 *   expression := term (('+' | '-') term)*
 *   term       := factor (('*' | '/') factor)*
 *   factor     := '-' factor | '+' factor | number | '(' expression ')'
 */
export function evaluate(source: string): number {
  if (source.trim() === '') throw new ExpressionError('The expression is empty.');
  const parser = new ArithmeticParser(source);
  const value = parser.expression();
  if (parser.peek() !== undefined) parser.fail('an operator');
  return value;
}

class ArithmeticParser {
  private position = 0;

  constructor(private readonly source: string) {}

  expression(): number {
    let value = this.term();
    for (let operator = this.peek(); operator === '+' || operator === '-'; operator = this.peek()) {
      this.position++;
      const right = this.term();
      value = operator === '+' ? value + right : value - right;
    }
    return value;
  }

  private term(): number {
    let value = this.factor();
    for (let operator = this.peek(); operator === '*' || operator === '/'; operator = this.peek()) {
      this.position++;
      const right = this.factor();
      if (operator === '/' && right === 0) throw new ExpressionError(`Division by zero in "${this.source}".`);
      value = operator === '*' ? value * right : value / right;
    }
    return value;
  }

  private factor(): number {
    const next = this.peek();
    if (next === '-' || next === '+') {
      this.position++;
      return next === '-' ? -this.factor() : this.factor();
    }
    if (next === '(') {
      this.position++;
      const value = this.expression();
      if (this.peek() !== ')') this.fail('")"');
      this.position++;
      return value;
    }
    const match = /^(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?/.exec(this.source.slice(this.position));
    if (!match) return this.fail('a number or "("');
    this.position += match[0].length;
    return Number(match[0]);
  }

  /** The next character that is not a space, or undefined at the end. */
  peek(): string | undefined {
    while (this.position < this.source.length && /\s/.test(this.source[this.position]!)) this.position++;
    return this.source[this.position];
  }

  fail(what: string): never {
    const found = this.position < this.source.length ? `"${this.source[this.position]}"` : 'the end';
    throw new ExpressionError(`Syntax error at position ${this.position + 1}: expected ${what}, found ${found} in "${this.source}".`);
  }
}
