import { Worker } from 'node:worker_threads';

const POLL_MS = 200;

// When the host dies the kernel gives this process a new parent, so the parent pid changes. That
// test cannot be fooled by the old pid being reused, as a liveness check of the old pid could be.
const WATCHDOG_SOURCE = `
const { workerData } = require('node:worker_threads');
setInterval(() => {
  if (process.ppid !== workerData.hostPid) process.kill(process.pid, 'SIGKILL');
}, workerData.pollMs);
`;

/**
 * Ends this worker process soon after its host dies. An idle worker notices on its own (its pipes
 * close), but one running a block is stuck in `runSync` on the main thread and would burn a core
 * until the block timeout; a thread of its own still runs then. A host that died before this starts
 * leaves an idle worker, which its closed pipes end.
 */
export function startOrphanWatchdog(): void {
  const watchdog = new Worker(WATCHDOG_SOURCE, { eval: true, workerData: { hostPid: process.ppid, pollMs: POLL_MS } });
  // The worker exits when the host closes its pipes; this thread must not keep it alive.
  watchdog.unref();
  watchdog.on('error', (error) => process.stderr.write(`sandbox worker: the orphan watchdog stopped: ${error.message}\n`));
}
