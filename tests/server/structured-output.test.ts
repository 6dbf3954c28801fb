import OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { rejectionOf } from '../rejection.js';
import { repl } from '../repl.js';
import { rlmApp, rlmServer, seenByRoot } from './helpers.js';

// `response_format` on rlm serve: the answer is JSON checked against the caller's schema, the
// official openai client's parse() reads it back, and a run without a matching answer is a 422.

const Contract = z.object({
  parties: z.array(z.object({ name: z.string(), signed: z.string().nullable() })),
  total: z.number(),
});
const value = { parties: [{ name: 'Ada', signed: '2024-03-01' }, { name: 'Bob', signed: null }], total: 1200 };
const question = { role: 'user' as const, content: 'Who signed, and for how much?' };
const contract = { role: 'system' as const, content: 'Ada signed on 2024-03-01; Bob did not sign. Total 1200.' };

describe('response_format json_schema', () => {
  it('answers parse() with zodResponseFormat: message.parsed is the value the root model gave FINAL', async () => {
    const { client, rootRequests } = await rlmServer({ root: [repl(`const answer = ${JSON.stringify(value)}; FINAL(answer)`)] });
    const completion = await client.chat.completions.parse({ model: 'root', messages: [contract, question], response_format: zodResponseFormat(Contract, 'contract') });
    expect(completion.choices[0]!.message.parsed).toEqual(value);
    expect(JSON.parse(completion.choices[0]!.message.content!)).toEqual(value);
    // The root model was shown the caller's schema.
    expect(seenByRoot(rootRequests[0]!)).toContain(`The answer's shape`);
    expect(seenByRoot(rootRequests[0]!)).toContain('parties');
  });

  it('streams the answer as JSON text, after refusing one that does not match', async () => {
    const { client } = await rlmServer({ root: [repl('FINAL({ parties: [] })'), repl(`FINAL(${JSON.stringify(value)})`)] });
    const chunks = await client.chat.completions.create({ model: 'root', messages: [contract, question], response_format: zodResponseFormat(Contract, 'contract'), stream: true });
    let content = '';
    for await (const chunk of chunks) content += chunk.choices[0]?.delta.content ?? '';
    expect(JSON.parse(content)).toEqual(value);
  });

  it('refuses a FINAL that does not match, and the root model fixes it', async () => {
    const wrong = { parties: [{ name: 'Ada' }], total: '1200' };
    const { client, rootRequests } = await rlmServer({ root: [repl(`FINAL(${JSON.stringify(wrong)})`), repl(`FINAL(${JSON.stringify(value)})`)] });
    const completion = await client.chat.completions.parse({ model: 'root', messages: [contract, question], response_format: zodResponseFormat(Contract, 'contract') });
    expect(completion.choices[0]!.message.parsed).toEqual(value);
    expect(seenByRoot(rootRequests[1]!)).toMatch(/parties\.0\.signed/);
    expect(seenByRoot(rootRequests[1]!)).toMatch(/total/);
  });

  it('gives a forced answer that matches finish_reason "stop", so parse() accepts it; rlm.forced still tells', async () => {
    const { client } = await rlmServer({ root: [repl('print(1)'), JSON.stringify(value)] }, { run: { maxIterations: 1 } });
    const completion = await client.chat.completions.parse({ model: 'root', messages: [contract, question], response_format: zodResponseFormat(Contract, 'contract') });
    expect(completion.choices[0]!.message.parsed).toEqual(value);
    expect(completion.choices[0]!.finish_reason).toBe('stop');
    expect((completion as unknown as { rlm: { forced: boolean } }).rlm.forced).toBe(true);
  });

  it('answers 422 invalid_output with the problems when the run finds no matching answer', async () => {
    const { client } = await rlmServer({ root: [repl('print(1)'), JSON.stringify({ parties: [], total: 'a lot' })] }, { run: { maxIterations: 1 } });
    const apiError = await rejectionOf(
      client.chat.completions.parse({ model: 'root', messages: [contract, question], response_format: zodResponseFormat(Contract, 'contract') }),
      OpenAI.UnprocessableEntityError,
    );
    expect(apiError.status).toBe(422);
    expect(apiError.code).toBe('invalid_output');
    expect(apiError.param).toBe('response_format');
    expect(apiError.message).toMatch(/total: expected number, received string/);
    expect((apiError.error as { rlm_partial_answer?: string }).rlm_partial_answer).toContain('a lot');
  });

  it('checks a hand-written JSON Schema the same way', async () => {
    const schema = { type: 'object', properties: { count: { type: 'integer' } }, required: ['count'], additionalProperties: false };
    const { client } = await rlmServer({ root: [repl('FINAL({ count: 2.5 })'), repl('FINAL({ count: 3 })')] });
    const completion = await client.chat.completions.create({ model: 'root', messages: [question], response_format: { type: 'json_schema', json_schema: { name: 'count', schema, strict: true } } });
    expect(JSON.parse(completion.choices[0]!.message.content!)).toEqual({ count: 3 });
  });
});

describe('response_format json_object', () => {
  it('answers with a JSON object, refusing an answer that is not one', async () => {
    const { client, rootRequests } = await rlmServer({ root: [repl('print(context.length)'), 'FINAL(just prose)', repl('FINAL({ answer: "Ada" })')] });
    const completion = await client.chat.completions.create({ model: 'root', messages: [contract, question], response_format: { type: 'json_object' } });
    expect(JSON.parse(completion.choices[0]!.message.content!)).toEqual({ answer: 'Ada' });
    expect(seenByRoot(rootRequests[2]!)).toMatch(/not JSON/);
  });

  it('leaves the answer as text with response_format text', async () => {
    const { client } = await rlmServer({ root: [repl('print(1)'), 'FINAL(just prose)'] });
    const completion = await client.chat.completions.create({ model: 'root', messages: [question], response_format: { type: 'text' } });
    expect(completion.choices[0]!.message.content).toBe('just prose');
  });
});

describe('a malformed response_format', () => {
  const post = async (responseFormat: unknown) => {
    const { post } = await rlmApp({ root: ['FINAL(never asked)'] });
    return post(JSON.stringify({ model: 'root', messages: [question], response_format: responseFormat }));
  };

  it.each([
    ['an unknown type', { type: 'xml' }, 'response_format.type', /unknown type: use text, json_object or json_schema/],
    ['json_schema without a schema', { type: 'json_schema', json_schema: { name: 'x' } }, 'response_format.json_schema.schema', /schema must be a JSON Schema object/],
    ['a name with spaces', { type: 'json_schema', json_schema: { name: 'my schema', schema: { type: 'object' } } }, 'response_format.json_schema.name', /name must be/],
    ['a schema zod cannot read', { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'no-such-type' } } }, 'response_format.json_schema.schema', /output JSON Schema cannot be used/],
  ])('is a 400 naming the field: %s', async (_label, responseFormat, param, message) => {
    const { status, body } = await post(responseFormat);
    expect(status).toBe(400);
    expect(body.error.param).toBe(param);
    expect(body.error.message).toMatch(message);
  });
});
