import { afterEach, describe, expect, it } from 'vitest';
import { ConfigurationError, ModelError, OpenAIModel } from '../../src/index.js';
import { startFakeOpenAIServer, type FakeOpenAIServer, type FakeOpenAIServerOptions } from '../../src/testing.js';
import { eventually } from '../processes.js';
import { rejectionOf, thrownBy } from '../rejection.js';

let server: FakeOpenAIServer | undefined;
async function serve(options: FakeOpenAIServerOptions) {
  server = await startFakeOpenAIServer(options);
  return server;
}
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const weatherTool = {
  type: 'function' as const,
  function: { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
};

for (const stream of [false, true]) {
  describe(`OpenAIModel over real HTTP (${stream ? 'SSE streaming' : 'JSON'})`, () => {
    it('returns content, usage and finish reason', async () => {
      const fake = await serve({ replies: [{ content: 'Hello there', usage: { prompt_tokens: 12, completion_tokens: 3 } }] });
      const model = new OpenAIModel({ baseURL: fake.baseURL, stream });
      const reply = await model.chat({ model: 'gpt-test', messages: [{ role: 'user', content: 'Hi' }] });
      expect(reply).toEqual({ content: 'Hello there', toolCalls: [], usage: { inputTokens: 12, outputTokens: 3 }, finishReason: 'stop' });
      expect(fake.requests[0]!.body).toMatchObject({ model: 'gpt-test', messages: [{ role: 'user', content: 'Hi' }], stream });
    });

    it('returns tool calls and passes tools, tool_choice and response_format through', async () => {
      const fake = await serve({
        replies: [{ toolCalls: [{ id: 'call_a', name: 'get_weather', arguments: { city: 'Oslo' } }, { id: 'call_b', name: 'get_weather', arguments: { city: 'Rome' } }] }],
      });
      const model = new OpenAIModel({ baseURL: fake.baseURL, stream });
      const reply = await model.chat({
        model: 'gpt-test',
        messages: [{ role: 'user', content: 'Weather?' }],
        tools: [weatherTool],
        toolChoice: { type: 'function', function: { name: 'get_weather' } },
        responseFormat: { type: 'json_object' },
      });
      expect(reply.content).toBeNull();
      expect(reply.finishReason).toBe('tool_calls');
      expect(reply.toolCalls).toEqual([
        { id: 'call_a', name: 'get_weather', arguments: '{"city":"Oslo"}' },
        { id: 'call_b', name: 'get_weather', arguments: '{"city":"Rome"}' },
      ]);
      expect(fake.requests[0]!.body).toMatchObject({
        tools: [weatherTool],
        tool_choice: { type: 'function', function: { name: 'get_weather' } },
        response_format: { type: 'json_object' },
      });
    });
  });
}

describe('OpenAIModel errors and retries', () => {
  it('retries 429 honouring retry-after, then succeeds', async () => {
    const fake = await serve({ replies: [{ status: 429, headers: { 'retry-after': '0' } }, { status: 503, headers: { 'retry-after-ms': '10' } }, 'finally'] });
    const model = new OpenAIModel({ baseURL: fake.baseURL, maxRetries: 3 });
    const reply = await model.chat({ model: 'm', messages: [{ role: 'user', content: 'x' }] });
    expect(reply.content).toBe('finally');
    expect(fake.requests).toHaveLength(3);
  });

  it('retries 408 and 409 too', async () => {
    const fake = await serve({ replies: [{ status: 408, headers: { 'retry-after': '0' } }, { status: 409, headers: { 'retry-after': '0' } }, 'ok'] });
    const model = new OpenAIModel({ baseURL: fake.baseURL, maxRetries: 2 });
    expect((await model.chat({ model: 'm', messages: [{ role: 'user', content: 'x' }] })).content).toBe('ok');
    expect(fake.requests).toHaveLength(3);
  });

  it('gives up after maxRetries with a ModelError carrying the status', async () => {
    const fake = await serve({ reply: () => ({ status: 500, headers: { 'retry-after': '0' }, error: { message: 'upstream broke' } }) });
    const model = new OpenAIModel({ baseURL: fake.baseURL, maxRetries: 2 });
    const failure = model.chat({ model: 'm', messages: [{ role: 'user', content: 'x' }] });
    await expect(failure).rejects.toBeInstanceOf(ModelError);
    await expect(failure).rejects.toMatchObject({ code: 'model_error', status: 500 });
    expect(fake.requests).toHaveLength(3);
  });

  it('does not retry a 400 and explains a 404', async () => {
    const fake = await serve({ replies: [{ status: 400, error: { message: 'bad request' } }, { status: 404, error: { message: 'no such model' } }] });
    const model = new OpenAIModel({ baseURL: fake.baseURL, maxRetries: 3 });
    await expect(model.chat({ model: 'm', messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({ status: 400 });
    expect(fake.requests).toHaveLength(1);
    expect(await rejectionOf(model.chat({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }), ModelError)).toMatchObject({ code: 'model_error', message: expect.stringMatching(/HTTP 404.*Check the model name "nope"/) });
  });

  it('times out a slow request', async () => {
    const fake = await serve({ latencyMs: 2_000, reply: () => 'late' });
    const model = new OpenAIModel({ baseURL: fake.baseURL, timeoutMs: 100, maxRetries: 0 });
    expect(await rejectionOf(model.chat({ model: 'm', messages: [{ role: 'user', content: 'x' }] }), ModelError)).toMatchObject({ code: 'model_error', message: expect.stringMatching(/no complete response within 100 ms \(the request timeout\)/) });
  });

  it('stops when the signal aborts, with the caller’s reason', async () => {
    const fake = await serve({ latencyMs: 2_000, reply: () => 'late' });
    const model = new OpenAIModel({ baseURL: fake.baseURL, maxRetries: 0 });
    const controller = new AbortController();
    const stop = new Error('user pressed stop');
    const chat = model.chat({ model: 'm', messages: [{ role: 'user', content: 'x' }], signal: controller.signal });
    // The caller stops once the server holds the request, 2 s before it would answer.
    expect(await eventually(() => fake.requests.length === 1, 10_000)).toBe(true);
    controller.abort(stop);
    expect(await rejectionOf(chat, Error)).toBe(stop);
  });

  it('sends the API key and extra body fields', async () => {
    const fake = await serve({ replies: ['ok'] });
    const model = new OpenAIModel({ baseURL: fake.baseURL, apiKey: 'sk-test-123', extraBody: { temperature: 0 } });
    await model.chat({ model: 'm', messages: [{ role: 'user', content: 'x' }] });
    expect(fake.requests[0]!.headers.authorization).toBe('Bearer sk-test-123');
    expect(fake.requests[0]!.body.temperature).toBe(0);
  });

  it('needs no key for a server on loopback', async () => {
    const fake = await serve({ replies: ['ok'] });
    const saved = process.env.OPENAI_API_KEY;
    delete process.env.OPENAI_API_KEY;
    try {
      const model = new OpenAIModel({ baseURL: fake.baseURL.replace('127.0.0.1', 'localhost') });
      expect((await model.chat({ model: 'm', messages: [{ role: 'user', content: 'x' }] })).content).toBe('ok');
    } finally {
      if (saved !== undefined) process.env.OPENAI_API_KEY = saved;
    }
  });

  it('names OPENAI_API_KEY and the flag when a remote server has no key', () => {
    const saved = process.env.OPENAI_API_KEY;
    delete process.env.OPENAI_API_KEY;
    try {
      expect(thrownBy(() => new OpenAIModel({ baseURL: 'https://api.example.com/v1' }), ConfigurationError)).toMatchObject({
        code: 'missing_api_key',
        message: expect.stringMatching(/OPENAI_API_KEY is not set: pass --api-key/),
      });
    } finally {
      if (saved !== undefined) process.env.OPENAI_API_KEY = saved;
    }
  });
});
