import { RLM, Sandbox } from '../src/index.js';
import { ScriptedModel } from '../src/testing.js';
const repl = (code: string) => '```repl\n' + code + '\n```';
const root = new ScriptedModel((r) => r.messages.some((m) => String(m.content).startsWith('Code executed')) ? { delayMs: 0, content: 'FINAL(done)' } : { delayMs: 0, content: repl('llm_query_batched(Array.from({ length: 10 }, (_, i) => "q" + i))') });
const sub = new ScriptedModel(() => ({ delayMs: 0, content: 'a' }));
await Sandbox.prewarm();
const t0 = performance.now();
for (let k = 0; k < 100; k++) {
  const rlm = new RLM({ model: 'root', subModel: 'sub', languageModel: { chat: (r) => (r.model === 'root' ? root : sub).chat(r) } });
  await rlm.completion({ context: 'x', query: 'q' });
}
console.log('per run ms', ((performance.now() - t0) / 100).toFixed(2));
