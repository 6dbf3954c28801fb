// llm_query / llm_query_batched with { schema }: real sandbox, real openai client, fake server over HTTP.
import { afterEach, describe, expect, it } from 'vitest';
import { LlmQueries } from '../../src/engine/llm-queries.js';
import { routeHostCall } from '../../src/engine/host-calls.js';
import { OpenAIModel } from '../../src/index.js';
import { ModelGateway } from '../../src/lm/gateway.js';
import { singleModelProvider } from '../../src/lm/provider.js';
import { ModelScheduler } from '../../src/lm/scheduler.js';
import { UsageTracker } from '../../src/lm/usage.js';
import { startFakeOpenAIServer, type FakeOpenAIServer, type FakeOpenAIServerOptions, type FakeRequest } from '../../src/testing.js';
import { createSandbox } from '../sandbox/helpers.js';

let server: FakeOpenAIServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function sandboxAgainst(options: FakeOpenAIServerOptions) {
  server = await startFakeOpenAIServer(options);
  const model = new OpenAIModel({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });
  const gateway = new ModelGateway({ models: singleModelProvider(model), scheduler: new ModelScheduler(8), usage: new UsageTracker(), depth: 1 });
  const queries = new LlmQueries({ gateway, defaultModel: 'sub-model', maxToolIterations: 10 });
  const sandbox = await createSandbox({ blockTimeoutMs: 10_000, onHostCall: (call, { signal }) => routeHostCall({ call, signal, scope: { queries, subcalls: [], toolCalls: [], services: {}, runSignal: signal } }) });
  return { sandbox, requests: server.requests };
}

const PERSON = `const PERSON = { type: "object", properties: { name: { type: "string" }, age: { type: "integer" } }, required: ["name", "age"], additionalProperties: false };`;

const lastUser = (request: FakeRequest) => String((request.body.messages as { content: unknown }[]).at(-1)!.content);
const responseFormatOf = (request: FakeRequest) => request.body.response_format as { type: string; json_schema?: { strict?: boolean; schema?: unknown } } | undefined;

describe('llm_query with a schema', () => {
  it('sends strict structured output to a server that honours it and returns an object to model code', async () => {
    const { sandbox, requests } = await sandboxAgainst({ replies: ['{"name":"Ada","age":36}'] });
    const result = await sandbox.execute(`${PERSON}
      const person = llm_query("Who wrote the first program?", { schema: PERSON });
      print(typeof person, person.name, person.age + 1)`);
    expect(result.error).toBeUndefined();
    expect(result.stdout).toBe('object Ada 37\n');
    expect(requests).toHaveLength(1);
    expect(responseFormatOf(requests[0]!)).toMatchObject({ type: 'json_schema', json_schema: { name: 'llm_query_answer', strict: true, schema: { type: 'object', required: ['name', 'age'] } } });
    // With structured output the prompt is left as model code wrote it.
    expect(lastUser(requests[0]!)).toBe('Who wrote the first program?');
  });

  it('reads JSON a server that ignores response_format wraps in prose and a ```json fence', async () => {
    const { sandbox, requests } = await sandboxAgainst({ replies: ['Sure! Here it is:\n```json\n{"name":"Ada","age":36}\n```\nAnything else?'] });
    const result = await sandbox.execute(`${PERSON} const person = llm_query("Who?", { schema: PERSON }); print(person.name, typeof person.age)`);
    expect(result.stdout).toBe('Ada number\n');
    expect(requests).toHaveLength(1);
  });

  it('retries once with the problems when the reply is not JSON, then asks in the prompt for later calls', async () => {
    const { sandbox, requests } = await sandboxAgainst({ replies: ['The author is Ada, aged 36.', '{"name":"Ada","age":36}', '{"name":"Alan","age":41}'] });
    const result = await sandbox.execute(`${PERSON}
      const first = llm_query("Who?", { schema: PERSON });
      const second = llm_query("And then?", { schema: PERSON });
      print(first.name, second.name)`);
    expect(result.error).toBeUndefined();
    expect(result.stdout).toBe('Ada Alan\n');
    expect(requests).toHaveLength(3);
    const retry = requests[1]!;
    expect(retry.body.messages).toHaveLength(3);
    expect(lastUser(retry)).toContain('does not match the JSON Schema');
    expect(lastUser(retry)).toContain('not JSON');
    expect(lastUser(retry)).toContain('"required":["name","age"]');
    // The server ignored structured output: the retry and the next call ask for JSON in the prompt instead.
    expect(responseFormatOf(retry)).toBeUndefined();
    expect(responseFormatOf(requests[2]!)).toBeUndefined();
    expect(lastUser(requests[2]!)).toMatch(/^And then\?\n\nAnswer with a JSON value only[\s\S]*"required":\["name","age"\]/);
  });

  it('falls back to the prompt when the server answers 400 naming response_format', async () => {
    const { sandbox, requests } = await sandboxAgainst({
      replies: [{ status: 400, error: { message: "Unsupported parameter: 'response_format' of type json_schema", type: 'invalid_request_error' } }, '{"name":"Ada","age":36}'],
    });
    const result = await sandbox.execute(`${PERSON} print(llm_query("Who?", { schema: PERSON }).age)`);
    expect(result.stdout).toBe('36\n');
    expect(responseFormatOf(requests[0]!)).toMatchObject({ type: 'json_schema' });
    expect(responseFormatOf(requests[1]!)).toBeUndefined();
    expect(lastUser(requests[1]!)).toContain('Answer with a JSON value only');
  });

  it('throws a catchable OutputMismatchError naming the problems when the retry misses too', async () => {
    const { sandbox, requests } = await sandboxAgainst({ replies: ['{"name":"Ada"}', '{"name":"Ada","age":"thirty-six"}'] });
    const result = await sandbox.execute(`${PERSON} try { llm_query("Who?", { schema: PERSON }) } catch (e) { print(e.name + ": " + e.message) }`);
    expect(result.stdout).toMatch(/^OutputMismatchError: the answer does not match the schema, even after a retry: age: expected (an )?(integer|number)/);
    expect(lastUser(requests[1]!)).toMatch(/age/);
    // The reply was JSON: the server takes structured output, so the retry keeps it.
    expect(responseFormatOf(requests[1]!)).toMatchObject({ type: 'json_schema' });
  });

  it('marks the one batch item that fails validation twice and returns the others as objects', async () => {
    const { sandbox } = await sandboxAgainst({
      reply: (request) => {
        const prompt = String((request.body.messages as { content: unknown }[])[0]!.content);
        return prompt === 'bad' ? '{"name":42}' : JSON.stringify({ name: prompt, age: prompt.length });
      },
    });
    const result = await sandbox.execute(`${PERSON}
      const people = llm_query_batched(["ada", "bad", "alan"], { schema: PERSON });
      print(people.map((item) => typeof item === "string" ? item.split(" name: ")[0] : item.name + "/" + item.age).join(" | "))`);
    expect(result.error).toBeUndefined();
    expect(result.stdout).toBe('ada/3 | Error: OutputMismatchError: the answer does not match the schema, even after a retry: | alan/4\n');
  });

  it('refuses a schema zod cannot read, a non-object schema and an oversized one as catchable errors, before any model call', async () => {
    const { sandbox, requests } = await sandboxAgainst({ replies: [] });
    const result = await sandbox.execute(`
      const attempts = [{ type: "nonsense" }, "a string", { type: "object", description: "x".repeat(70000) }];
      for (const schema of attempts) {
        try { llm_query("q", { schema }); print("no error") } catch (e) { print(e.name + ": " + e.message.slice(0, 120)) }
      }
      try { llm_query_batched(["q"], { schema: { $ref: "#/nowhere" } }) } catch (e) { print(e.name + ": " + e.message) }`);
    expect(result.stdout.split('\n')).toEqual([
      'TypeError: llm_query: the schema cannot be used (Unsupported type: nonsense). Send a plain JSON Schema object.',
      'TypeError: llm_query: schema must be a JSON Schema object, got string (8 chars).',
      expect.stringMatching(/^TypeError: llm_query: invalid arguments \(schema: the schema is larger than 64 KB of JSON/),
      'TypeError: llm_query_batched: the schema cannot be used (Reference not found: #/nowhere). Send a plain JSON Schema object.',
      '',
    ]);
    expect(requests).toHaveLength(0);
  });

  it('refuses schema together with tools or response_format', async () => {
    const { sandbox } = await sandboxAgainst({ replies: [] });
    const result = await sandbox.execute(`${PERSON}
      try { llm_query("q", { schema: PERSON, response_format: { type: "json_object" } }) } catch (e) { print(e.message) }
      try { llm_query("q", { schema: PERSON, tools: [{ type: "function", function: { name: "f" } }], tool_handler: () => 1 }) } catch (e) { print(e.message) }`);
    expect(result.stdout).toBe('llm_query: give either schema or response_format, not both.\nllm_query: schema and tools cannot be combined; ask with tools first, then for the structured value.\n');
  });
});
