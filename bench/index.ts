// Runs every benchmark and prints its table: `npm run bench` (or `npm run bench -- lm` for one).
import { runEngineBench } from './engine.js';
import { runLmBench } from './lm.js';
import { runSandboxBench } from './sandbox.js';

const benches: Record<string, () => Promise<void>> = { sandbox: runSandboxBench, lm: runLmBench, engine: runEngineBench };
const chosen = process.argv.slice(2);
for (const [name, run] of Object.entries(benches)) {
  if (chosen.length === 0 || chosen.includes(name)) await run();
}
