// Runs every benchmark and prints its table: `npm run bench` (or `npm run bench -- lm` for one).
// Each benchmark runs in a fresh process, so one's garbage (100 MB contexts) cannot slow another.
import { spawnSync } from 'node:child_process';
import { cpus, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import { runBatchBench } from './batch.js';
import { runEngineBench } from './engine.js';
import { runLmBench } from './lm.js';
import { runPoolBench } from './pool.js';
import { runQueueBench } from './queue.js';
import { runSandboxBench } from './sandbox.js';
import { runServerBench } from './server.js';
import { runSoakBench } from './soak.js';
import { runStartupBench } from './startup.js';
import { runViewerBench } from './viewer.js';

const benches: Record<string, () => Promise<void>> = {
  startup: runStartupBench,
  sandbox: runSandboxBench,
  pool: runPoolBench,
  lm: runLmBench,
  engine: runEngineBench,
  server: runServerBench,
  soak: runSoakBench,
  batch: runBatchBench,
  viewer: runViewerBench,
  queue: runQueueBench,
};
const chosen = process.argv.slice(2);
if (chosen.length === 1 && benches[chosen[0]!]) {
  await benches[chosen[0]!]!();
} else {
  // Figures mean little without the machine they came from.
  const cores = cpus();
  console.log(`rlm bench: ${cores.length} cores (${cores[0]?.model.trim()}), ${(totalmem() / 2 ** 30).toFixed(1)} GB, Node ${process.version}, ${process.platform}`);
  for (const name of Object.keys(benches).filter((name) => chosen.length === 0 || chosen.includes(name))) {
    const result = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), name], { stdio: 'inherit' });
    if (result.status !== 0) process.exit(result.status ?? 1);
  }
}
