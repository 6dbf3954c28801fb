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
  let position = 0;
  const skipSpaces = () => {
    while (position < source.length && /\s/.test(source[position]!)) position++;
  };
  const peek = () => {
    skipSpaces();
    return source[position];
  };
  const fail = (what: string): never => {
    const found = position < source.length ? `"${source[position]}"` : 'the end';
    throw new ExpressionError(`Syntax error at position ${position + 1}: expected ${what}, found ${found} in "${source}".`);
  };

  const expression = (): number => {
    let value = term();
    for (let operator = peek(); operator === '+' || operator === '-'; operator = peek()) {
      position++;
      const right = term();
      value = operator === '+' ? value + right : value - right;
    }
    return value;
  };
  const term = (): number => {
    let value = factor();
    for (let operator = peek(); operator === '*' || operator === '/'; operator = peek()) {
      position++;
      const right = factor();
      if (operator === '/' && right === 0) throw new ExpressionError(`Division by zero in "${source}".`);
      value = operator === '*' ? value * right : value / right;
    }
    return value;
  };
  const factor = (): number => {
    const next = peek();
    if (next === '-') {
      position++;
      return -factor();
    }
    if (next === '+') {
      position++;
      return factor();
    }
    if (next === '(') {
      position++;
      const value = expression();
      if (peek() !== ')') fail('")"');
      position++;
      return value;
    }
    const match = /^(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?/.exec(source.slice(position));
    if (!match) return fail('a number or "("');
    position += match[0].length;
    return Number(match[0]);
  };

  if (source.trim() === '') throw new ExpressionError('The expression is empty.');
  const value = expression();
  if (peek() !== undefined) fail('an operator');
  return value;
}
