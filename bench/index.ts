// Runs every benchmark and prints its table: `npm run bench`.
import { runSandboxBench } from './sandbox.js';

await runSandboxBench();
