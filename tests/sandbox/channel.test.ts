import { describe, expect, it } from 'vitest';
import { createSandbox } from './helpers.js';

// Source shared by the test and the sandbox, so both sides build and check the same text. The
// block length is prime, so bytes landing at a wrong offset change the checksum.
const TEXT_HELPERS = `
function sampleText(length, alphabet) {
  let block = '';
  for (let i = 0; i < 997; i++) block += alphabet[(i * 7) % alphabet.length];
  return block.repeat(Math.ceil(length / block.length)).slice(0, length);
}
function checksum(text) {
  let hash = 2166136261;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 16777619);
  return hash >>> 0;
}`;
const { sampleText, checksum } = new Function(`${TEXT_HELPERS}; return { sampleText, checksum };`)() as {
  sampleText: (length: number, alphabet: string) => string;
  checksum: (text: string) => number;
};
const MULTIBYTE = 'abcdéü€–xyz0123456789';
const MB = 2 ** 20;

describe('host -> sandbox replies', () => {
  const cases = [
    { label: '64 KB', length: 64 * 1024, alphabet: MULTIBYTE, options: {} },
    { label: '1 MB', length: MB, alphabet: MULTIBYTE, options: {} },
  ];
  for (const { label, length, alphabet, options } of cases) {
    it(`arrive intact at ${label}`, async () => {
      const reply = sampleText(length, alphabet);
      const sandbox = await createSandbox({ ...options, onHostCall: () => reply });
      const result = await sandbox.execute(`${TEXT_HELPERS}\nconst reply = llm_query("send"); print(reply.length, checksum(reply))`);
      expect(result.error).toBeUndefined();
      expect(result.stdout).toBe(`${length} ${checksum(reply)}\n`);
    });
  }

  for (const count of [200, 1_000]) {
    it(`carry all ${count} answers of an llm_query_batched of ~400 chars each`, async () => {
      const answerTo = (prompt: string) => `${prompt}:${sampleText(400, MULTIBYTE)}`;
      const sandbox = await createSandbox({
        onHostCall: (call) => (call.kind === 'llm_query_batched' ? call.prompts.map((prompt) => answerTo(String(prompt))) : null),
      });
      const result = await sandbox.execute(`${TEXT_HELPERS}
const prompts = Array.from({ length: ${count} }, (_, i) => "prompt " + i);
const answers = llm_query_batched(prompts);
const tail = ":" + sampleText(400, ${JSON.stringify(MULTIBYTE)});
print(answers.length, answers.every((answer, i) => answer === prompts[i] + tail))`);
      expect(result.error).toBeUndefined();
      expect(result.stdout).toBe(`${count} true\n`);
    });
  }
});
