import { describe, expect, it } from 'vitest';
import { readRunLog } from '../../src/view/log-reader.js';
import { contractAnswer, loggedRun, structuredRun } from './helpers.js';

describe('readRunLog', () => {
  it('reads a whole rlm log into a run tree with child runs, sub-calls, tool calls and the end', async () => {
    const log = readRunLog((await loggedRun('How many?')).text);
    expect(log.problems).toEqual([]);
    expect(log.endsEarly).toBe(false);
    expect(log.metadata).toMatchObject({ query: 'How many?', rootModel: 'root', maxDepth: 2, maxIterations: 30 });
    expect(log.iterations.map((iteration) => iteration.index)).toEqual([1, 2]);
    const [block] = log.iterations[0]!.blocks;
    expect(block!.stdout).toBe('seven a summary 3\n');
    expect(block!.variables).toMatchObject({ child: 'string (5 chars)', sub: 'string (9 chars)' });
    expect(block!.durationMs).toBeGreaterThan(0);
    const child = block!.subcalls.find((call) => call.child);
    expect(child!.response).toBe('seven');
    expect(child!.child![0]!.blocks[0]!.finalAnswer).toBe('seven');
    const plain = block!.subcalls.find((call) => !call.child);
    expect(plain).toMatchObject({ model: 'sub', response: 'a summary' });
    expect(block!.toolCalls).toEqual([expect.objectContaining({ name: 'lookup', success: true, result: { value: 3 } })]);
    expect(log.iterations[1]!.finalAnswer).toBe('all done');
    expect(log.end).toMatchObject({ status: 'completed', answer: 'all done' });
  });

  it('reads a log cut off mid-line up to the cut, and says it ends early', async () => {
    const { text } = await loggedRun();
    const lines = text.trim().split('\n');
    const cut = [...lines.slice(0, 2), lines[2]!.slice(0, 40)].join('\n');
    const log = readRunLog(cut);
    expect(log.endsEarly).toBe(true);
    expect(log.problems).toEqual([]);
    expect(log.iterations).toHaveLength(1);
    expect(log.end).toBeUndefined();
  });

  it('lists unreadable lines in the middle as problems and reads the rest', () => {
    const text = ['{"type":"metadata","root_model":"m"}', 'not json', '{"type":"surprise"}', '{"type":"run_end","status":"error","error":{"message":"boom"}}'].join('\n');
    const log = readRunLog(text);
    expect(log.problems).toEqual(['line 2 is not JSON', 'line 3 has an unknown type "surprise"']);
    expect(log.end).toMatchObject({ status: 'error', error: { message: 'boom' } });
    expect(log.endsEarly).toBe(false);
  });

  it("reads the reference logger's format, which has no tool calls or run end", () => {
    const reference = [
      { type: 'metadata', root_model: 'gpt-5', max_depth: 1, max_iterations: 30, backend: 'openai', environment_type: 'local', other_backends: null },
      {
        type: 'iteration',
        iteration: 1,
        timestamp: '2026-01-01T00:00:00',
        prompt: [{ role: 'user', content: 'q' }],
        response: '```repl\nx = llm_query("hi")\n```',
        code_blocks: [
          {
            code: 'x = llm_query("hi")',
            result: {
              stdout: '',
              stderr: '',
              locals: { x: 'str' },
              execution_time: 0.5,
              rlm_calls: [{ root_model: 'gpt-5-mini', prompt: 'hi', response: 'hello', usage_summary: { model_usage_summaries: { 'gpt-5-mini': { total_calls: 1, total_input_tokens: 3, total_output_tokens: 2 } } }, execution_time: 0.25 }],
            },
          },
        ],
        final_answer: null,
        iteration_time: 1.5,
      },
    ]
      .map((entry) => JSON.stringify(entry))
      .join('\n');
    const log = readRunLog(reference);
    expect(log.problems).toEqual([]);
    expect(log.metadata).toMatchObject({ rootModel: 'gpt-5', environment: 'local', otherModels: [] });
    const iteration = log.iterations[0]!;
    expect(iteration.durationMs).toBe(1500);
    expect(iteration.blocks[0]!.toolCalls).toEqual([]);
    expect(iteration.blocks[0]!.subcalls[0]).toEqual({
      model: 'gpt-5-mini',
      prompt: 'hi',
      response: 'hello',
      durationMs: 250,
      usage: { 'gpt-5-mini': { calls: 1, inputTokens: 3, outputTokens: 2 } },
      error: undefined,
      child: undefined,
    });
    expect(log.endsEarly).toBe(true);
  });

  it('reads the output schema and each rejected FINAL, in a block and at the end of a turn', async () => {
    const log = readRunLog((await structuredRun()).text);
    expect(log.problems).toEqual([]);
    expect(log.metadata!.outputSchema).toMatchObject({ type: 'object', required: ['parties', 'effective'] });
    const [first, second, third] = log.iterations;
    expect(first!.blocks[0]!.rejectedFinals).toEqual([{ answer: '{"parties":"none"}', problems: ['parties: expected array, received string', 'effective: missing (expected string)'] }]);
    expect(first!.rejectedFinal).toBeUndefined();
    expect(second!.rejectedFinal).toMatchObject({ answer: '{parties: [], effective: "x"}' });
    expect(second!.rejectedFinal!.problems.length).toBeGreaterThan(0);
    expect(third!.blocks[0]!.rejectedFinals).toEqual([]);
    expect(JSON.parse(log.end!.answer!)).toEqual(contractAnswer);
  });

  it('reads logs without these fields, and malformed ones, without throwing', async () => {
    const old = readRunLog((await loggedRun()).text);
    expect(old.metadata!.outputSchema).toBeUndefined();
    expect(old.iterations.every((iteration) => iteration.rejectedFinal === undefined && iteration.blocks.every((block) => block.rejectedFinals.length === 0))).toBe(true);
    const odd = [
      { type: 'metadata', output_schema: 'not an object' },
      { type: 'iteration', iteration: 1, prompt: [], response: '', final_answer: null, rejected_final: 7, code_blocks: [{ code: 'x', result: { rejected_finals: [null, { answer: { a: 1 }, problems: 'one' }, { problems: [1, null] }] } }] },
    ];
    const log = readRunLog(odd.map((entry) => JSON.stringify(entry)).join('\n'));
    expect(log.problems).toEqual([]);
    expect(log.metadata!.outputSchema).toBeUndefined();
    expect(log.iterations[0]!.rejectedFinal).toEqual({ answer: '', problems: [] });
    expect(log.iterations[0]!.blocks[0]!.rejectedFinals).toEqual([
      { answer: '', problems: [] },
      { answer: '{"a":1}', problems: [] },
      { answer: '', problems: ['1', ''] },
    ]);
  });
});
