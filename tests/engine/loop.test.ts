import { describe, expect, it } from 'vitest';
import { RLM } from '../../src/index.js';
import { everythingSent, lastUserMessage, models } from './helpers.js';
import { repl } from '../repl.js';

describe('prompts', () => {
  it('teaches the REPL and shows the root model metadata, never the raw context', async () => {
    const secret = 'UNIQUE-MARKER-' + 'x'.repeat(50_000);
    const { rootModel, languageModel } = models([repl('print(context.length)'), 'FINAL(done)']);
    const rlm = new RLM({ model: 'root', languageModel });
    await rlm.completion({ context: secret, query: 'How long is it?' });
    const system = rootModel.calls[0]!.messages[0]!;
    expect(system.role).toBe('system');
    for (const phrase of ['context', 'llm_query(', 'llm_query_batched(', 'rlm_query(', 'rlm_query_batched(', 'FINAL(', 'FINAL_VAR(', 'SHOW_VARS()', 'print(', 'cut after 20,000 characters', '```repl']) {
      expect(system.content, phrase).toContain(phrase);
    }
    // One user message: what the context is, then the turn prompt (roles alternate, see alternateRoles).
    expect(String(rootModel.calls[0]!.messages[1]!.content).split('\n\n')[0]).toBe('Your context is a string of 50,014 characters.');
    expect(lastUserMessage(rootModel.calls[0]!)).toContain('How long is it?');
    expect(everythingSent(rootModel)).not.toContain('UNIQUE-MARKER');
  });

  it('describes array contexts with the lengths of the first items', async () => {
    const { rootModel, languageModel } = models([repl('print(1)'), 'FINAL(x)']);
    await new RLM({ model: 'root', languageModel }).completion({ context: ['abc', 'de', { k: 1 }], query: 'q' });
    expect(String(rootModel.calls[0]!.messages[1]!.content).split('\n\n')[0]).toBe('Your context is an array of 3 items with 12 characters in total. Item lengths in characters: [3, 2, 7].');
  });

  it('lets users replace the system prompt', async () => {
    const { rootModel, languageModel } = models([repl('FINAL(1)')]);
    await new RLM({ model: 'root', languageModel, systemPrompt: 'You are terse.' }).completion('ctx');
    expect(rootModel.calls[0]!.messages[0]).toEqual({ role: 'system', content: 'You are terse.' });
  });
});

describe('code blocks', () => {
  it('runs repl, js, javascript, ts and typescript blocks in order, and nothing else', async () => {
    const reply = [
      '```repl\nconst order = ["repl"]\n```',
      '```js\norder.push("js")\n```',
      '```javascript\norder.push("javascript")\n```',
      '```python\norder.push("python")\n```',
      '```ts\nconst typed: string[] = order; typed.push("ts")\n```',
      '```typescript\ninterface Shape { n: number }\nconst shape: Shape = { n: 1 }; order.push("typescript")\n```',
      '```\norder.push("bare")\n```',
    ].join('\n\nSome text.\n\n');
    const { rootModel, languageModel } = models([reply, repl('print(order.join(","))'), 'FINAL(ok)']);
    const result = await new RLM({ model: 'root', languageModel }).completion('ctx');
    expect(result.trajectory[0]!.codeBlocks.map((block) => block.language)).toEqual(['js', 'js', 'js', 'ts', 'ts']);
    expect(lastUserMessage(rootModel.calls[2]!)).not.toContain('python');
    expect(JSON.stringify(rootModel.calls[2]!.messages)).toContain('repl,js,javascript,ts,typescript');
  });

  it('sends each block output back, cut at the output limit', async () => {
    const { rootModel, languageModel } = models([repl('print("a".repeat(500))') + '\n' + repl('print("second block")'), 'FINAL(x)']);
    await new RLM({ model: 'root', languageModel, sandbox: { outputLimitChars: 100 } }).completion('ctx');
    // Both outputs, in order, in the one user message that follows the reply (roles alternate).
    const turn = rootModel.calls[1]!.messages;
    expect(turn.map((message) => message.role)).toEqual(['system', 'user', 'assistant', 'user']);
    const outputs = String(turn[3]!.content).split(/(?=Code executed)/).filter((part) => part.startsWith('Code executed'));
    expect(outputs).toHaveLength(2);
    expect(outputs[0]).toContain('a'.repeat(100) + '\n... [output truncated: 401 more characters');
    expect(outputs[1]).toContain('second block');
  });

  it('shows errors and lets the model retry', async () => {
    const { rootModel, languageModel } = models([repl('const n = undefinedThing.length'), repl('const n = context.length; FINAL(n)')]);
    const result = await new RLM({ model: 'root', languageModel }).completion('12345');
    expect(result.response).toBe('5');
    expect(JSON.stringify(rootModel.calls[1]!.messages)).toContain('ReferenceError: undefinedThing is not defined');
  });

  it('nudges after empty replies and replies with neither code nor FINAL', async () => {
    const { rootModel, languageModel } = models(['', 'I think the answer is obvious.', repl('FINAL("done")')]);
    const result = await new RLM({ model: 'root', languageModel }).completion('ctx');
    expect(result.response).toBe('done');
    expect(lastUserMessage(rootModel.calls[1]!)).toContain('Your last reply was empty.');
    expect(lastUserMessage(rootModel.calls[2]!)).toContain('no ```repl block and no FINAL(...)');
  });
});

describe('final answers', () => {
  it('ends after the block that calls FINAL; later blocks do not run', async () => {
    const { languageModel } = models([repl('FINAL("from code")') + '\n' + repl('throw new Error("must not run")')]);
    const result = await new RLM({ model: 'root', languageModel }).completion('ctx');
    expect(result.response).toBe('from code');
    expect(result.trajectory[0]!.codeBlocks).toHaveLength(1);
    expect(result.iterations).toBe(1);
    expect(result.forced).toBe(false);
  });

  it('serializes numeric and object answers', async () => {
    const numeric = models([repl('FINAL(42)')]);
    expect((await new RLM({ model: 'root', languageModel: numeric.languageModel }).completion('c')).response).toBe('42');
    const object = models([repl('const answer = { names: ["a", "b"], count: 2 }'), repl('FINAL_VAR("answer")')]);
    expect((await new RLM({ model: 'root', languageModel: object.languageModel }).completion('c')).response).toBe('{"names":["a","b"],"count":2}');
  });

  it('accepts FINAL written as text after code has run, keeping nested parentheses whole', async () => {
    const { languageModel } = models([repl('print(1)'), 'I have it.\nFINAL(The total (after tax (20%)) is 5)\nThanks.']);
    expect((await new RLM({ model: 'root', languageModel }).completion('c')).response).toBe('The total (after tax (20%)) is 5');
  });

  it('ignores FINAL text before any code has run', async () => {
    const { rootModel, languageModel } = models(['FINAL(a guess)', repl('print(context)'), 'FINAL(informed)']);
    const result = await new RLM({ model: 'root', languageModel }).completion('c');
    expect(result.response).toBe('informed');
    expect(lastUserMessage(rootModel.calls[1]!)).toContain('Your FINAL was ignored: you have not run any code');
  });

  it('accepts a FINAL before any code when the model gives it again, after one refusal', async () => {
    const { rootModel, languageModel } = models(() => 'FINAL(42)');
    const result = await new RLM({ model: 'root', languageModel, maxIterations: 30 }).completion('c');
    expect(result.response).toBe('42');
    expect(result.forced).toBe(false);
    expect(rootModel.calls).toHaveLength(2);
    expect(lastUserMessage(rootModel.calls[1]!)).toContain('give your FINAL again and it will be accepted');
  });

  it('ignores FINAL text in the same reply as code (the model has not seen the output)', async () => {
    const { rootModel, languageModel } = models([
      repl('print("warm up")'),
      repl('const x = 7; print(x)') + '\nREPL output: 7\nFINAL(invented 7)',
      'FINAL(real 7)',
    ]);
    const result = await new RLM({ model: 'root', languageModel }).completion('c');
    expect(result.response).toBe('real 7');
    expect(lastUserMessage(rootModel.calls[2]!)).toContain('in the same reply as code');
  });

  it('never counts FINAL inside a code fence as a text answer', async () => {
    const { languageModel } = models([repl('print(1)'), 'Here is an example:\n```python\nFINAL(from python fence)\n```', 'FINAL(outside)']);
    expect((await new RLM({ model: 'root', languageModel }).completion('c')).response).toBe('outside');
  });

  it('resolves FINAL_VAR text through the sandbox and reports unknown names', async () => {
    const { rootModel, languageModel } = models([repl('const result = "from variable"'), 'FINAL_VAR(missing)', 'FINAL_VAR(result)']);
    const answer = await new RLM({ model: 'root', languageModel }).completion('c');
    expect(answer.response).toBe('from variable');
    expect(lastUserMessage(rootModel.calls[2]!)).toContain('no variable named "missing"');
  });
});

describe('iteration limit', () => {
  it('asks once more for the best answer and marks it forced', async () => {
    const { rootModel, languageModel } = models([repl('print(1)'), repl('print(2)'), 'My best answer: 3']);
    const result = await new RLM({ model: 'root', languageModel, maxIterations: 2 }).completion({ context: 'c', query: 'q' });
    expect(result).toMatchObject({ response: 'My best answer: 3', forced: true, iterations: 2 });
    expect(lastUserMessage(rootModel.calls[2]!)).toContain('You have used all your turns');
    expect(rootModel.calls).toHaveLength(3);
  });
});
