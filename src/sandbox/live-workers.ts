// The sandbox worker processes this process started and that have not exited yet. A worker notices
// on its own that its host is gone (its pipes close; a busy one's orphan watchdog polls every
// 200 ms), but a process that ends cleanly stops its children itself, so none outlives it.
// No imports: the CLI's entry point loads this on every command, `rlm --help` included.

interface LiveWorker {
  /** Kills the process at once; it exits moments later. */
  kill(): void;
  /** Kills the process and resolves once it has exited. */
  stop(): Promise<void>;
}

const live = new Set<LiveWorker>();
let exitHookInstalled = false;

/** Records a started worker; call the returned function once it has exited. */
export function trackWorker(worker: LiveWorker): () => void {
  live.add(worker);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    // The last moment of any exit (process.exit, an empty event loop): only synchronous work runs
    // here, so the workers are killed without waiting for them.
    process.on('exit', () => {
      for (const each of live) each.kill();
    });
  }
  return () => live.delete(worker);
}

/** Stops every worker still running (spares included) and resolves once all have exited. */
export async function stopWorkerProcesses(): Promise<void> {
  // The pool may start a spare while the first ones stop (its refill is scheduled, not immediate).
  while (live.size > 0) await Promise.all([...live].map((worker) => worker.stop()));
}
