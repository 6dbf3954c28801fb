import { setMaxListeners } from 'node:events';
import { failureReply, serveHostCall, type HostCallHandler } from './serve-host-call.js';
import type { HostCallMode, IsolateHandle } from './isolate-handle.js';

/**
 * Told that a block cannot go on until one of its asynchronous tool calls (see `setTools`) is
 * answered: `pendingCalls` of them are out, and the block sends nothing more until then. `scope` is
 * what the caller passed to `execute` for that block. Called while the sandbox reads the worker's
 * messages: return quickly, and do not throw.
 */
export type BlockWaitingHandler<Scope = unknown> = (context: { scope: Scope | undefined; pendingCalls: number }) => void;

interface HostCallBridgeOptions<Scope> {
  worker: IsolateHandle;
  /** What the block's calls are served with. */
  scope: Scope | undefined;
  onHostCall: HostCallHandler<Scope> | undefined;
  onBlockWaiting: BlockWaitingHandler<Scope> | undefined;
}

/**
 * Serves the host calls of one block and keeps count of the time the block spends waiting for
 * them, which does not count against its time limit: while a synchronous call is out, or after the
 * block said it waits for its asynchronous calls and until one of them is answered. That is wall
 * time, counted once however many calls are out; asynchronous calls out while the block computes
 * are not waiting. Calls still running when the block ends are aborted, and their answers dropped.
 */
export class HostCallBridge<Scope = unknown> {
  readonly #worker: IsolateHandle;
  readonly #block = new AbortController();
  /** Asynchronous calls not answered yet. */
  readonly #unanswered = new Set<number>();
  #syncCallOut = false;
  #blockWaiting = false;
  #waitedTotalMs = 0;
  #waitingSince: number | undefined;

  constructor({ worker, scope, onHostCall, onBlockWaiting }: HostCallBridgeOptions<Scope>) {
    this.#worker = worker;
    setMaxListeners(0, this.#block.signal); // every host call of a batch listens to it
    worker.onHostCall = (id, request, mode) => {
      if (mode === 'sync') this.#syncCallOut = true;
      else this.#unanswered.add(id);
      this.#updateClock();
      void serveHostCall(request, { signal: this.#block.signal, scope, handler: onHostCall }).then((reply) => this.#answer(id, mode, reply));
    };
    worker.onWaiting = (calls) => {
      // The notice crossed an answer on its way: the block goes on as soon as it reads that one.
      if (!calls.every((id) => this.#unanswered.has(id))) return;
      this.#blockWaiting = true;
      this.#updateClock();
      try {
        onBlockWaiting?.({ scope, pendingCalls: calls.length });
      } catch (error) {
        // An embedder's handler must not take the host down: the calls the block waits for fail instead.
        const failure = failureReply(error);
        for (const id of [...this.#unanswered]) this.#answer(id, 'async', failure);
      }
    };
  }

  /** Time the block has spent waiting for host calls so far. */
  get waitedMs(): number {
    return this.#waitedTotalMs + (this.#waitingSince === undefined ? 0 : performance.now() - this.#waitingSince);
  }

  close(): void {
    this.#block.abort(new Error('the block has ended'));
    this.#worker.onHostCall = undefined;
    this.#worker.onWaiting = undefined;
  }

  #answer(id: number, mode: HostCallMode, reply: string): void {
    if (this.#block.signal.aborted) return;
    if (mode === 'sync') this.#syncCallOut = false;
    else {
      // A waiting block waits for every call it has out, so any answer lets it go on.
      this.#unanswered.delete(id);
      this.#blockWaiting = false;
    }
    this.#updateClock();
    this.#worker.replyToHostCall(id, reply);
  }

  #updateClock(): void {
    const waiting = this.#syncCallOut || this.#blockWaiting;
    if (waiting && this.#waitingSince === undefined) this.#waitingSince = performance.now();
    if (!waiting && this.#waitingSince !== undefined) {
      this.#waitedTotalMs += performance.now() - this.#waitingSince;
      this.#waitingSince = undefined;
    }
  }
}
