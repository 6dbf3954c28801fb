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
 * Ends this worker process soon after its host dies. The main thread notices on its own (its pipes
 * close), but a backstop that does not depend on it costs one thread: blocks run on isolated-vm's
 * threads, and one spinning would otherwise burn a core until its block timeout if the main thread
 * were ever held up. A host that died before this starts leaves an idle worker, which its closed
 * pipes end.
 */
export function startOrphanWatchdog(): void {
  const watchdog = new Worker(WATCHDOG_SOURCE, { eval: true, workerData: { hostPid: process.ppid, pollMs: POLL_MS } });
  // The worker exits when the host closes its pipes; this thread must not keep it alive.
  watchdog.unref();
  watchdog.on('error', (error) => process.stderr.write(`sandbox worker: the orphan watchdog stopped: ${error.message}\n`));
}
