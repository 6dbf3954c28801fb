// Engine benchmark: the runtime's own share of a scripted run's wall time. Every model call takes
// 50 ms; the ideal run takes only the model time on its critical path, so everything above that is
// the runtime's share (sandboxes, code, scheduling, events). The baseline makes the same model calls
// in the same tree with nothing but a p-queue of the same size, in the same run.
import PQueue from 'p-queue';
import { RLM, Sandbox, type ChatRequest, type Isolation, type LanguageModel } from '../src/index.js';
import { ScriptedModel } from '../src/testing.js';
import { RUNS, LATENCY_MS, CONCURRENCY, median, ms, printTable, ratio } from './report.js';

const MAX_CONCURRENT_CHILDREN = 4;
const SUB_CALLS = [10, 100, 1_000];
const TARGET_SHARE = 0.05;
/** How many children each run starts, level by level from the root: small trees, so runs stay short. */
const FAN_OUT: Record<number, number[]> = { 1: [], 2: [4], 3: [2, 2] };

const repl = (code: string) => '```repl\n' + code + '\n```';

/** A run's work: its own sub-calls if it is a leaf, otherwise its children's. */
interface Task {
  n: number;
  children: Task[];
}

function taskTree(n: number, fanOut: number[]): Task {
  const [parts, ...below] = fanOut;
  const shares = parts === undefined ? [] : Array.from({ length: parts }, (_, i) => Math.floor(n / parts) + (i < n % parts ? 1 : 0));
  return { n, children: shares.map((share) => taskTree(share, below)) };
}

/** One block for every run of the tree; `task` is the JavaScript source of its Task. */
function runCode(task: string): string {
  return `const task = ${task};
if (task.children.length === 0) llm_query_batched(Array.from({ length: task.n }, (_, i) => "q" + i));
else rlm_query_batched(task.children.map((child) => JSON.stringify(child)));`;
}

function scriptedModel(subCalls: number, depth: number): LanguageModel {
  const delay = { delayMs: LATENCY_MS };
  const seenOutput = (request: ChatRequest) => request.messages.some((message) => String(message.content).startsWith('Code executed'));
  const root = new ScriptedModel((request) => {
    const isChild = String(request.messages[1]?.content).includes('child run');
    if (seenOutput(request)) return { ...delay, content: 'FINAL(done)' };
    // Children answer from their block, so only the root spends a turn on its answer.
    if (isChild) return { ...delay, content: repl(`${runCode('JSON.parse(context)')}\nFINAL("ok")`) };
    return { ...delay, content: repl(runCode(JSON.stringify(taskTree(subCalls, FAN_OUT[depth]!)))) };
  });
  const sub = new ScriptedModel(() => ({ ...delay, content: 'answer' }));
  return { chat: (request) => (request.model === 'root' ? root : sub).chat(request) };
}

/** Model time on the critical path: one code turn per level, rounds of sub-calls through 16 slots, the root's answer. */
function idealMs(subCalls: number, depth: number): number {
  return (depth + Math.ceil(subCalls / CONCURRENCY) + 1) * LATENCY_MS;
}

async function rlmRunMs(subCalls: number, depth: number, isolation: Isolation = 'isolate'): Promise<number> {
  await Sandbox.prewarm(1, { isolation });
  const languageModel = scriptedModel(subCalls, depth);
  const rlm = new RLM({ model: 'root', subModel: 'sub', languageModel, maxDepth: depth, maxConcurrency: CONCURRENCY, maxConcurrentChildren: MAX_CONCURRENT_CHILDREN, sandbox: { isolation } });
  const started = performance.now();
  const result = await rlm.completion({ context: 'bench', query: 'q' });
  const elapsed = performance.now() - started;
  if (result.usage.byModel.sub?.calls !== subCalls) throw new Error(`expected ${subCalls} sub-calls, got ${result.usage.byModel.sub?.calls}`);
  return elapsed;
}

/** The same model calls in the same tree, made directly: every run's code turn, the leaves' sub-calls, the root's answer. */
async function bareTreeMs(subCalls: number, depth: number): Promise<number> {
  const queue = new PQueue({ concurrency: CONCURRENCY });
  const model = new ScriptedModel(() => ({ delayMs: LATENCY_MS, content: 'answer' }));
  const turn = () => queue.add(() => model.chat({ model: 'bare', messages: [{ role: 'user', content: 'q' }] }));
  const run = async (task: Task): Promise<void> => {
    await turn();
    if (task.children.length === 0) await Promise.all(Array.from({ length: task.n }, turn));
    else await Promise.all(task.children.map(run));
  };
  const started = performance.now();
  await run(taskTree(subCalls, FAN_OUT[depth]!));
  await turn();
  return performance.now() - started;
}

async function medianOf(measure: () => Promise<number>): Promise<number> {
  const values: number[] = [];
  for (let run = 0; run < RUNS; run++) values.push(await measure());
  return median(values);
}

function treeLabel(depth: number): string {
  return ['root', ...FAN_OUT[depth]!.map((children) => `${children} each`)].join(' > ');
}

export async function runEngineBench(): Promise<void> {
  const rows: string[][] = [];
  let depth3With100 = 0;
  for (const depth of Object.keys(FAN_OUT).map(Number)) {
    for (const subCalls of SUB_CALLS) {
      const wall = await medianOf(() => rlmRunMs(subCalls, depth));
      const bare = await medianOf(() => bareTreeMs(subCalls, depth));
      const ideal = idealMs(subCalls, depth);
      const share = (wall - ideal) / wall;
      if (depth === 3 && subCalls === 100) depth3With100 = wall;
      rows.push([
        String(depth),
        treeLabel(depth),
        subCalls.toLocaleString('en-US'),
        ms(ideal),
        ms(bare),
        ms(wall),
        ratio(wall, bare),
        ms(wall - ideal),
        `${(share * 100).toFixed(1)}%`,
        subCalls >= 100 ? `<= ${TARGET_SHARE * 100}%` : '',
      ]);
    }
  }
  printTable(
    `Engine: runtime share of wall time (model latency ${LATENCY_MS} ms, concurrency ${CONCURRENCY}; bare = the same model calls in the same tree through a p-queue, no rlm; median of ${RUNS})`,
    ['depth', 'tree', 'sub-calls', 'model time (ideal)', 'bare', 'rlm wall', 'rlm / bare', 'runtime (rlm - ideal)', 'runtime share', 'target'],
    rows,
  );
  await printIsolationShares(depth3With100);
}

/** The depth-3 tree with 100 sub-calls (`pooled`: its wall time above), against a process per sandbox. */
async function printIsolationShares(pooled: number): Promise<void> {
  const [subCalls, depth] = [100, 3];
  const ideal = idealMs(subCalls, depth);
  const share = (wall: number) => `${(((wall - ideal) / wall) * 100).toFixed(1)}%`;
  const ownProcess = await medianOf(() => rlmRunMs(subCalls, depth, 'process'));
  printTable(
    `Engine, depth 3 (${treeLabel(depth)}), ${subCalls} sub-calls: runtime share with each isolation (baseline: --isolation process, same run; median of ${RUNS})`,
    ['isolation', 'rlm wall', 'runtime share', 'baseline wall', 'baseline share', 'wall / baseline', 'target'],
    [['isolate (default)', ms(pooled), share(pooled), ms(ownProcess), share(ownProcess), ratio(pooled, ownProcess), `<= ${TARGET_SHARE * 100}%`]],
  );
}
