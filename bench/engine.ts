// Engine benchmark: the runtime's own share of a scripted run's wall time. Every model call takes
// 50 ms; the ideal run takes only the model time on its critical path, so everything above that is
// the runtime's share (sandboxes, code, scheduling, events).
import { RLM, Sandbox, type ChatRequest, type LanguageModel } from '../src/index.js';
import { ScriptedModel } from '../src/testing.js';
import { median, ms, printTable } from './report.js';

const LATENCY_MS = 50;
const CONCURRENCY = 16;
const CHILDREN = 4;
const repl = (code: string) => '```repl\n' + code + '\n```';

function scriptedModel(subCalls: number, depth: number): LanguageModel {
  const delay = { delayMs: LATENCY_MS };
  const seenOutput = (request: ChatRequest) => request.messages.some((message) => String(message.content).startsWith('Code executed'));
  const root = new ScriptedModel((request) => {
    const isChild = String(request.messages[1]?.content).includes('child run');
    if (seenOutput(request)) return { ...delay, content: 'FINAL(done)' };
    if (isChild) return { ...delay, content: repl(`const n = Number(context); llm_query_batched(Array.from({ length: n }, (_, i) => "q" + i)); FINAL("ok")`) };
    if (depth === 1) return { ...delay, content: repl(`llm_query_batched(Array.from({ length: ${subCalls} }, (_, i) => "q" + i))`) };
    const share = Array.from({ length: CHILDREN }, (_, i) => Math.floor(subCalls / CHILDREN) + (i < subCalls % CHILDREN ? 1 : 0));
    return { ...delay, content: repl(`rlm_query_batched(${JSON.stringify(share.map(String))})`) };
  });
  const sub = new ScriptedModel(() => ({ ...delay, content: 'answer' }));
  return { chat: (request) => (request.model === 'root' ? root : sub).chat(request) };
}

/** Model time on the critical path: root turns plus rounds of sub-calls through 16 slots. */
function idealMs(subCalls: number, depth: number): number {
  const rounds = Math.ceil(subCalls / CONCURRENCY);
  // depth 1: root (code) -> sub-call rounds -> root (FINAL)
  // depth 2: root (code) -> children: root (code) -> sub rounds -> (FINAL in code) -> root (FINAL)
  return depth === 1 ? (2 + rounds) * LATENCY_MS : (3 + rounds) * LATENCY_MS;
}

export async function runEngineBench(): Promise<void> {
  const rows: string[][] = [];
  for (const depth of [1, 2]) {
    for (const subCalls of [10, 100, 1_000]) {
      const walls: number[] = [];
      for (let run = 0; run < 3; run++) {
        await Sandbox.prewarm();
        const rlm = new RLM({ model: 'root', subModel: 'sub', languageModel: scriptedModel(subCalls, depth), maxDepth: depth, maxConcurrency: CONCURRENCY, maxConcurrentChildren: CHILDREN });
        const started = performance.now();
        const result = await rlm.completion({ context: 'bench', query: 'q' });
        walls.push(performance.now() - started);
        if (result.usage.byModel.sub?.calls !== subCalls) throw new Error(`expected ${subCalls} sub-calls, got ${result.usage.byModel.sub?.calls}`);
      }
      const wall = median(walls);
      const ideal = idealMs(subCalls, depth);
      const share = (wall - ideal) / wall;
      rows.push([String(depth), subCalls.toLocaleString('en-US'), ms(ideal), ms(wall), ms(wall - ideal), `${(share * 100).toFixed(1)}%`, share <= 0.05 ? 'yes' : 'no']);
    }
  }
  printTable(`Engine: runtime share of wall time (model latency ${LATENCY_MS} ms, concurrency ${CONCURRENCY}, ${CHILDREN} children at depth 2; median of 3)`, ['depth', 'sub-calls', 'model time (ideal)', 'wall', 'runtime', 'runtime share', '<= 5%'], rows);
}
