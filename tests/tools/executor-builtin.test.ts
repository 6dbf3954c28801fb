import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { calculatorTool, defineTool, echoTool } from '../../src/index.js';
import { evaluate as evaluateArithmetic, ExpressionError } from '../../src/tools/builtin.js';
import { ToolExecutor, type ToolResult } from '../../src/tools/executor.js';
import { ToolRegistry } from '../../src/tools/registry.js';
import { thrownBy } from '../rejection.js';

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      reject(signal.reason);
    });
  });

function timeline() {
  const events: string[] = [];
  let running = 0;
  let peak = 0;
  const tool = (name: string, policy: 'parallel' | 'sequential', ms: number) =>
    defineTool({
      name,
      executionPolicy: policy,
      parameters: z.object({ id: z.number() }),
      execute: async ({ id }) => {
        events.push(`start ${name}${id}`);
        peak = Math.max(peak, ++running);
        await sleep(ms);
        running--;
        events.push(`end ${name}${id}`);
        return id * 10;
      },
    });
  return { events, tool, peak: () => peak };
}

describe('ToolExecutor', () => {
  it('runs sequential tools one at a time in order, parallel ones concurrently, results in call order', async () => {
    const { events, tool } = timeline();
    const executor = new ToolExecutor(new ToolRegistry([tool('seq', 'sequential', 20), tool('par', 'parallel', 30)]));
    const results = await executor.execute([
      { callId: 'a', name: 'seq', arguments: { id: 1 } },
      { callId: 'b', name: 'par', arguments: { id: 2 } },
      { callId: 'c', name: 'seq', arguments: { id: 3 } },
      { callId: 'd', name: 'par', arguments: '{"id": 4}' },
    ]);
    expect(results.map((result) => [result.callId, result.result])).toEqual([['a', 10], ['b', 20], ['c', 30], ['d', 40]]);
    expect(events.indexOf('end seq1')).toBeLessThan(events.indexOf('start seq3'));
    expect(events.indexOf('start par4')).toBeLessThan(events.indexOf('end par2'));
  });

  it('limits parallel calls to maxConcurrency', async () => {
    const { tool, peak } = timeline();
    const executor = new ToolExecutor(new ToolRegistry([tool('par', 'parallel', 15)]), { maxConcurrency: 3 });
    await executor.execute(Array.from({ length: 10 }, (_, id) => ({ name: 'par', arguments: { id } })));
    expect(peak()).toBe(3);
  });

  it('never throws: unknown tools, bad arguments, exceptions, timeouts and aborts become results', async () => {
    const registry = new ToolRegistry([
      defineTool({ name: 'boom', execute: () => { throw new Error('exploded') } }),
      defineTool({ name: 'slow', timeoutMs: 50, execute: (_args, { signal }) => sleep(5_000, signal) }),
      defineTool({ name: 'typed', parameters: z.object({ n: z.number() }), execute: ({ n }) => n }),
    ]);
    const executor = new ToolExecutor(registry);
    const results = await executor.execute([
      { name: 'nope', arguments: {} },
      { name: 'typed', arguments: { n: 'x' } },
      { name: 'typed', arguments: '{broken' },
      { name: 'boom', arguments: {} },
      { name: 'slow', arguments: {} },
    ]);
    expect(results.map((result) => result.success)).toEqual([false, false, false, false, false]);
    expect(results[0]!.error).toBe('Unknown tool "nope". Available tools: boom, slow, typed.');
    expect(results[1]!.error).toContain('Invalid arguments for typed: n: expected number, received string');
    expect(results[2]!.error).toMatch(/^The arguments for typed are not valid JSON/);
    expect(results[3]!.error).toBe('exploded');
    expect(results[4]!.error).toBe('slow timed out after 50 ms.');

    const controller = new AbortController();
    const pending = executor.executeOne({ name: 'slow', arguments: {} }, { signal: controller.signal });
    controller.abort(new Error('stop'));
    expect(await pending).toMatchObject({ success: false, error: 'slow was cancelled.' });
  });

  it('applies the default timeout, but not to long-running tools', async () => {
    const registry = new ToolRegistry([
      defineTool({ name: 'normal', execute: () => sleep(120).then(() => 'done') }),
      defineTool({ name: 'batch_job', longRunning: true, execute: () => sleep(120).then(() => 'done') }),
    ]);
    const results = await new ToolExecutor(registry, { timeoutMs: 60 }).execute([{ name: 'normal', arguments: {} }, { name: 'batch_job', arguments: {} }]);
    expect(results.map((result) => result.error ?? result.result)).toEqual(['normal timed out after 60 ms.', 'done']);
  });

  it('reports start, end and error to its callbacks', async () => {
    const seen: string[] = [];
    const executor = new ToolExecutor(new ToolRegistry([echoTool, defineTool({ name: 'bad', execute: () => { throw new Error('nope') } })]), {
      onToolStart: (name, callId, args) => seen.push(`start ${name} ${callId} ${JSON.stringify(args)}`),
      onToolEnd: (result: ToolResult) => seen.push(`end ${result.toolName} ${result.success}`),
      onToolError: (name, _callId, error) => seen.push(`error ${name} ${error}`),
    });
    await executor.execute([{ callId: 'c1', name: 'echo', arguments: { message: 'hi' } }, { callId: 'c2', name: 'bad', arguments: {} }]);
    // The two calls run in parallel, so only the order within each call is fixed.
    expect(seen.filter((entry) => entry.includes('echo'))).toEqual(['start echo c1 {"message":"hi"}', 'end echo true']);
    expect(seen.filter((entry) => entry.includes('bad'))).toEqual(['start bad c2 {}', 'error bad nope', 'end bad false']);
  });
});

describe('built-in tools', () => {
  it('calculator follows precedence, parentheses, decimals and unary minus', () => {
    expect(evaluateArithmetic('10 + 5 * 2')).toBe(20);
    expect(evaluateArithmetic('(10 + 5) * 2')).toBe(30);
    expect(evaluateArithmetic('-3 - -2')).toBe(-1);
    expect(evaluateArithmetic('2.5 * 4 / .5')).toBe(20);
    expect(evaluateArithmetic('-(1 + 2) * 3')).toBe(-9);
    expect(evaluateArithmetic('  7 ')).toBe(7);
    expect(evaluateArithmetic('8 / 2 / 2')).toBe(2);
    expect(evaluateArithmetic('1 - 2 - 3')).toBe(-4);
  });

  it('calculator gives clear errors and never evaluates code', () => {
    expect(thrownBy(() => evaluateArithmetic('1 / (2 - 2)'), ExpressionError)).toMatchObject({ code: 'invalid_expression', message: expect.stringContaining('Division by zero in "1 / (2 - 2)".') });
    expect(thrownBy(() => evaluateArithmetic('2 +'), ExpressionError)).toMatchObject({ code: 'invalid_expression', message: expect.stringContaining('Syntax error at position 4: expected a number or "(", found the end') });
    expect(thrownBy(() => evaluateArithmetic('(1 + 2'), ExpressionError)).toMatchObject({ code: 'invalid_expression', message: expect.stringContaining('expected ")"') });
    expect(thrownBy(() => evaluateArithmetic('process.exit(1)'), ExpressionError)).toMatchObject({ code: 'invalid_expression', message: expect.stringMatching(/Syntax error at position 1/) });
    expect(thrownBy(() => evaluateArithmetic('2 3'), ExpressionError)).toMatchObject({ code: 'invalid_expression', message: expect.stringContaining('expected an operator, found "3"') });
    expect(thrownBy(() => evaluateArithmetic(''), ExpressionError)).toMatchObject({ code: 'invalid_expression', message: expect.stringContaining('The expression is empty.') });
  });

  it('calculator and echo run through the executor', async () => {
    const executor = new ToolExecutor(new ToolRegistry([calculatorTool, echoTool]));
    const [sum, divide, echo] = await executor.execute(
      [
        { callId: 'k1', name: 'calculator', arguments: { expression: '(1 + 2) * 4' } },
        { callId: 'k2', name: 'calculator', arguments: { expression: '1/0' } },
        { callId: 'k3', name: 'echo', arguments: { message: 'hello' } },
      ],
      { invocationId: 'inv-7' },
    );
    expect(sum!.result).toEqual({ result: 12, expression: '(1 + 2) * 4' });
    expect(divide).toMatchObject({ success: false, error: 'Division by zero in "1/0".' });
    expect(echo!.result).toEqual({ message: 'hello', invocation_id: 'inv-7', function_call_id: 'k3' });
  });
});
