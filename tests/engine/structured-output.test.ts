import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { ConfigurationError, RLM, RunFailedError } from '../../src/index.js';
import { rejectionOf } from '../rejection.js';
import { repl } from '../repl.js';
import { tempFolder } from '../temp-folder.js';
import { everythingSent, lastUserMessage, models } from './helpers.js';

const contract = z.object({
  parties: z.array(z.object({ name: z.string(), signed: z.string() })),
  effective: z.string(),
});

const contractJsonSchema = {
  type: 'object',
  properties: {
    parties: { type: 'array', items: { type: 'object', properties: { name: { type: 'string' }, signed: { type: 'string' } }, required: ['name', 'signed'] } },
    effective: { type: 'string' },
  },
  required: ['parties', 'effective'],
};

const valid = { parties: [{ name: 'Acme', signed: '2024-01-02' }, { name: 'Globex', signed: '2024-01-03' }], effective: '2024-02-01' };

/** The text the model read after its turn `index` (0-based): the outputs of that turn's blocks, and notes. */
function readAfter(rootModel: ReturnType<typeof models>['rootModel'], index: number): string {
  return lastUserMessage(rootModel.calls[index + 1]!);
}

describe('structured answers in the REPL', () => {
  for (const [form, output] of [
    ['zod', contract],
    ['JSON Schema', contractJsonSchema],
  ] as const) {
    it(`refuses a FINAL that misses a field and has a wrong type, naming both paths, then takes the fix (${form})`, async () => {
      const wrong = { parties: [{ name: 'Acme', signed: '2024-01-02' }, { name: 'Globex', signed: '2024-01-03' }, { name: 'Initech', signed: null }] };
      const { rootModel, languageModel } = models([
        repl(`FINAL(${JSON.stringify(wrong)}); print("not reached")`),
        repl(`const fixed = ${JSON.stringify(valid)}; FINAL(fixed)`),
      ]);
      const result = await new RLM({ model: 'root', languageModel }).completion({ context: 'a contract', query: 'parties?', output });
      const refusal = readAfter(rootModel, 0);
      expect(refusal).toContain('TypeError');
      expect(refusal).toContain('parties.2.signed: expected string, received null');
      expect(refusal).toContain('effective: missing (expected string)');
      expect(result.trajectory[0]!.codeBlocks[0]!.result.stdout).not.toContain('not reached');
      expect(result.output).toEqual(valid);
      expect(JSON.parse(result.response)).toEqual(valid);
      expect(result.iterations).toBe(2);
      expect(result.trajectory[0]!.codeBlocks[0]!.rejectedFinals).toEqual([
        { answer: JSON.stringify(wrong), problems: ['parties.2.signed: expected string, received null', 'effective: missing (expected string)'] },
      ]);
    });
  }

  it('lets the block catch the refusal and fix the value in the same block', async () => {
    const code = `let answer = { parties: [], effective: 5 };
try { FINAL(answer) } catch (error) { print("caught", error.name, error.message.includes("effective")); answer = { parties: [], effective: "2024" }; FINAL(answer) }`;
    const { languageModel } = models([repl(code)]);
    const result = await new RLM({ model: 'root', languageModel }).completion({ context: 'c', output: contract });
    expect(result.output).toEqual({ parties: [], effective: '2024' });
    expect(result.trajectory[0]!.codeBlocks[0]!.result.stdout).toContain('caught TypeError true');
  });

  it('takes FINAL_VAR of an object, with nested arrays of objects', async () => {
    const schema = z.object({ groups: z.array(z.object({ label: z.string(), members: z.array(z.object({ id: z.number().int(), tags: z.array(z.string()) })) })) });
    const value = { groups: [{ label: 'a', members: [{ id: 1, tags: ['x'] }, { id: 2, tags: [] }] }, { label: 'b', members: [] }] };
    const badValue = { groups: [{ label: 'a', members: [{ id: 1, tags: ['x', 7] }] }] };
    const { rootModel, languageModel } = models([repl(`const found = ${JSON.stringify(badValue)}; FINAL_VAR("found")`), repl(`const result = ${JSON.stringify(value)}; FINAL_VAR("result")`)]);
    const result = await new RLM({ model: 'root', languageModel }).completion({ context: 'c', output: schema });
    expect(readAfter(rootModel, 0)).toContain('groups.0.members.0.tags.1: expected string, received number');
    expect(result.output).toEqual(value);
  });

  it('reads a text FINAL as JSON: invalid JSON is a note for the next turn, then the fixed one is taken', async () => {
    const { rootModel, languageModel } = models([repl('print(context.length)'), 'FINAL({parties: [], effective: "x"})', `FINAL(${JSON.stringify(valid)})`]);
    const result = await new RLM({ model: 'root', languageModel }).completion({ context: 'c', output: contract });
    const note = readAfter(rootModel, 1);
    expect(note).toContain('does not match the output schema');
    expect(note).toContain('not JSON');
    expect(result.trajectory[1]!.rejectedFinal?.answer).toBe('{parties: [], effective: "x"}');
    expect(result.output).toEqual(valid);
    expect(result.iterations).toBe(3);
  });

  it('shows the schema in the system prompt and says how to finish', async () => {
    const { rootModel, languageModel } = models([repl(`FINAL(${JSON.stringify(valid)})`)]);
    await new RLM({ model: 'root', languageModel }).completion({ context: 'c', output: contract });
    const system = String(rootModel.calls[0]!.messages[0]!.content);
    expect(system).toContain('"effective":{"type":"string"}');
    expect(system).toContain('FINAL(value)');
  });

  it('types result.output from a zod schema; response is its JSON text', async () => {
    const { languageModel } = models([repl(`FINAL(${JSON.stringify(valid)})`)]);
    const result = await new RLM({ model: 'root', languageModel }).completion({ context: 'c', output: contract });
    expectTypeOf(result.output).toEqualTypeOf<z.infer<typeof contract>>();
    expect(result.output.parties[1]!.name).toBe('Globex');
    expect(result.response).toBe(JSON.stringify(valid));
  });

  it('takes output in a session completion, and leaves the next completion without it as before', async () => {
    const { languageModel } = models([repl('FINAL({ parties: [], effective: 1 })'), repl('FINAL({ parties: [], effective: "1" })'), repl('FINAL({ any: "thing" })')]);
    const session = new RLM({ model: 'root', languageModel }).session();
    try {
      const first = await session.completion({ context: 'c', output: contract });
      expect(first.output).toEqual({ parties: [], effective: '1' });
      const second = await session.completion({ context: 'd' });
      expect(second.response).toBe('{"any":"thing"}');
      expect('output' in second).toBe(false);
    } finally {
      await session.close();
    }
  });

  it('records the schema and refused answers in the trajectory log', async () => {
    const logDir = tempFolder('rlm-structured-');
    const { languageModel } = models([repl('FINAL({ parties: "none" })'), repl(`FINAL(${JSON.stringify(valid)})`)]);
    await new RLM({ model: 'root', languageModel, logDir }).completion({ context: 'c', output: contract });
    const lines = readFileSync(join(logDir, readdirSync(logDir)[0]!), 'utf8').trim().split('\n').map((line) => JSON.parse(line));
    expect(lines[0].output_schema.required).toEqual(['parties', 'effective']);
    expect(lines[1].code_blocks[0].result.rejected_finals[0].problems).toEqual(['parties: expected array, received string', 'effective: missing (expected string)']);
    expect(lines.at(-1)).toMatchObject({ type: 'run_end', status: 'completed', answer: JSON.stringify(valid) });
  });
});

describe('the forced answer with an output schema', () => {
  it('asks for JSON with the structured output format and takes a matching reply', async () => {
    const { rootModel, languageModel } = models([repl('print(1)'), '```json\n' + JSON.stringify(valid) + '\n```']);
    const result = await new RLM({ model: 'root', languageModel, maxIterations: 1 }).completion({ context: 'c', output: contract });
    expect(result.forced).toBe(true);
    expect(result.output).toEqual(valid);
    const forced = rootModel.calls[1]!;
    expect(lastUserMessage(forced)).toContain('JSON value matching this JSON Schema');
    expect(forced.responseFormat).toMatchObject({ type: 'json_schema', json_schema: { name: 'final_answer', strict: true, schema: { type: 'object', additionalProperties: false } } });
  });

  it('asks in the prompt only when the schema has no strict form', async () => {
    const { rootModel, languageModel } = models([repl('print(1)'), '["a","b"]']);
    const result = await new RLM({ model: 'root', languageModel, maxIterations: 1 }).completion({ context: 'c', output: z.array(z.string()) });
    expect(result.output).toEqual(['a', 'b']);
    expect(rootModel.calls[1]!.responseFormat).toBeUndefined();
  });

  it('fails with invalid_output, the problems and the last candidate when the forced answer does not match', async () => {
    const candidate = '{"parties":[{"name":"Acme"}],"effective":"2024"}';
    const { languageModel } = models([repl('print(1)'), candidate]);
    const error = await rejectionOf(new RLM({ model: 'root', languageModel, maxIterations: 1 }).completion({ context: 'c', output: contract }), RunFailedError);
    expect(error.code).toBe('invalid_output');
    expect(error.message).toContain('parties.0.signed: missing (expected string)');
    expect(error.partialAnswer).toBe(candidate);
  });
});

describe('hostile values given to FINAL under a schema', () => {
  const hostile: [string, string][] = [
    ['a getter that throws', 'FINAL({ get parties() { throw new Error("boom") }, effective: "x" })'],
    ['a Proxy whose traps throw', 'FINAL(new Proxy({}, { ownKeys() { throw new Error("trap") } }))'],
    ['a cycle', 'const a = { parties: [], effective: "x" }; a.self = a; FINAL(a)'],
    ['an array of a million items', 'FINAL({ parties: new Array(1e6).fill(0), effective: "x" })'],
  ];
  for (const [name, code] of hostile) {
    it(`fails ${name} in the block, and the run goes on`, async () => {
      const { rootModel, languageModel } = models([repl(`${code}; print("not reached")`), repl('FINAL({ parties: [], effective: "ok" })')]);
      const started = performance.now();
      const result = await new RLM({ model: 'root', languageModel }).completion({ context: 'c', output: contract });
      expect(performance.now() - started).toBeLessThan(30_000);
      const block = result.trajectory[0]!.codeBlocks[0]!.result;
      expect(block.error?.name).toBe('TypeError');
      expect(block.final).toBeUndefined();
      expect(block.reset).toBe(false);
      expect(block.stdout).not.toContain('not reached');
      expect(readAfter(rootModel, 0)).toContain(`TypeError: ${name === 'an array of a million items' ? 'FINAL: the answer does not match' : 'FINAL: the answer cannot be written as JSON'}`);
      expect(result.output).toEqual({ parties: [], effective: 'ok' });
    });
  }

  it('lists at most ten problems of a value wrong in a million places', async () => {
    const { rootModel, languageModel } = models([repl('FINAL({ parties: new Array(1e6).fill(0), effective: "x" })'), repl('FINAL({ parties: [], effective: "ok" })')]);
    await new RLM({ model: 'root', languageModel }).completion({ context: 'c', output: contract });
    const refusal = readAfter(rootModel, 0);
    expect(refusal).toContain('parties.9: expected object, received number');
    expect(refusal).not.toContain('parties.10:');
    expect(refusal).toContain('and 999,990 more');
  });
});

describe('the output option', () => {
  it('refuses a JSON Schema it cannot use, before anything runs', async () => {
    const { rootModel, languageModel } = models([]);
    const rlm = new RLM({ model: 'root', languageModel });
    const error = await rejectionOf(rlm.completion({ context: 'c', output: { type: 'frobnicate' } }), ConfigurationError);
    expect(error.message).toContain('Unsupported type: frobnicate');
    await rejectionOf(rlm.completion({ context: 'c', output: 'a string' as never }), ConfigurationError);
    expect(rootModel.calls).toHaveLength(0);
  });

  it('leaves a run without output as it was: FINAL of an object is its JSON, no check, no schema in the prompt', async () => {
    const { rootModel, languageModel } = models([repl('FINAL({ anything: [1, 2] })')]);
    const result = await new RLM({ model: 'root', languageModel }).completion({ context: 'c' });
    expect(result.response).toBe('{"anything":[1,2]}');
    expect('output' in result).toBe(false);
    expect(everythingSent(rootModel)).not.toContain("The answer's shape");
  });
});

describe('checking FINAL costs the run, not the host', () => {
  it('keeps the host responsive while a block loops FINAL of a million items that fail the schema', async () => {
    const code = `const big = { parties: new Array(1e6).fill(0), effective: "x" };
let refused = 0;
for (let i = 0; i < 20; i++) { try { FINAL(big) } catch { refused++ } }
print("refused", refused)`;
    const { languageModel } = models([repl(code), repl('FINAL({ parties: [], effective: "ok" })')]);
    const rlm = new RLM({ model: 'root', languageModel, sandbox: { blockTimeoutMs: 10_000 } });
    let largestGapMs = 0;
    let last = performance.now();
    const ticker = setInterval(() => {
      const now = performance.now();
      largestGapMs = Math.max(largestGapMs, now - last);
      last = now;
    }, 10);
    const started = performance.now();
    try {
      const result = await rlm.completion({ context: 'c', output: contract });
      const block = result.trajectory[0]!.codeBlocks[0]!.result;
      // The block ends by itself, refused every time, or at its time limit: never answered.
      expect(block.final).toBeUndefined();
      if (!block.error) expect(block.stdout).toContain('refused 20');
      expect(result.output).toEqual({ parties: [], effective: 'ok' });
    } finally {
      clearInterval(ticker);
    }
    console.log(`largest host event-loop gap: ${Math.round(largestGapMs)} ms, run ${Math.round(performance.now() - started)} ms`);
    expect(performance.now() - started).toBeLessThan(60_000);
    expect(largestGapMs).toBeLessThan(1_000);
  }, 120_000);
});

describe('the caller’s own schema ends the turn', () => {
  it('refuses at the end of the turn a FINAL the block took but a zod refinement does not, as a note; then takes the fix', async () => {
    const withParties = contract.refine((value) => value.parties.length > 0, 'name at least one party');
    const { rootModel, languageModel } = models([repl('FINAL({ parties: [], effective: "2024" })'), repl(`FINAL(${JSON.stringify(valid)})`)]);
    const result = await new RLM({ model: 'root', languageModel }).completion({ context: 'c', output: withParties });
    // The JSON Schema form the block checks against cannot say it: the block took the answer.
    expect(result.trajectory[0]!.codeBlocks[0]!.result.final).toBe('{"parties":[],"effective":"2024"}');
    expect(readAfter(rootModel, 0)).toContain('Your FINAL was not taken: it does not match the output schema:\n- (the answer): name at least one party');
    expect(result.trajectory[0]!.rejectedFinal?.problems).toEqual(['(the answer): name at least one party']);
    expect(result.output).toEqual(valid);
    expect(result.iterations).toBe(2);
  });
});
