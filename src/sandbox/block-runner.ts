import { untilAborted } from '../abort.js';
import { DEFAULTS } from '../defaults.js';
import { SandboxError } from '../errors.js';
import { blockResult, resetResult, type ExecuteResult, type Variable } from './block-result.js';
import { BlockWatchdog } from './block-watchdog.js';
import { HostCallBridge, type BlockWaitingHandler } from './host-call-bridge.js';
import { BlockSyntaxError, rewriteBlock, type RewrittenBlock } from './rewrite.js';
import type { SandboxLimits } from './sandbox-limits.js';
import type { HostCallHandler } from './serve-host-call.js';
import type { IsolateHandle } from './isolate-handle.js';
import { WorkerExitError } from './worker-process.js';

interface BlockRunnerOptions<Scope> {
  limits: SandboxLimits;
  onHostCall: HostCallHandler<Scope> | undefined;
  onBlockWaiting: BlockWaitingHandler<Scope> | undefined;
  /** Drops the sandbox's worker: the block cost it (a reset), or it can no longer be trusted. */
  discardWorker: () => void;
}

interface RunOptions<Scope> {
  signal?: AbortSignal | undefined;
  scope?: Scope | undefined;
  /** See Sandbox.execute. */
  checkFinal?: boolean | undefined;
  /** Contexts loaded into the worker, in MB: they count towards the resident memory it may use. */
  loadedContextMb: number;
}

/**
 * Runs blocks in a worker: rewrites each into a REPL cell, serves its host calls, guards it with a
 * watchdog and turns the worker's reply into an ExecuteResult. Remembers the variables the last
 * block left, which a block that does not compile leaves unchanged.
 */
export class BlockRunner<Scope = unknown> {
  readonly #options: BlockRunnerOptions<Scope>;
  #lastVariables: Variable[] = [];

  constructor(options: BlockRunnerOptions<Scope>) {
    this.#options = options;
  }

  async run(worker: IsolateHandle, code: string, options: RunOptions<Scope>): Promise<ExecuteResult> {
    const started = performance.now();
    const elapsed = () => performance.now() - started;
    let rewritten: RewrittenBlock;
    try {
      rewritten = rewriteBlock(code);
    } catch (error) {
      if (!(error instanceof BlockSyntaxError)) throw error;
      const syntaxError = { name: 'SyntaxError', message: error.message, stack: `SyntaxError: ${error.message}\n${error.frame}` };
      return { stdout: '', error: syntaxError, durationMs: elapsed(), variables: this.#lastVariables, reset: false };
    }
    const result = await this.#execute(worker, rewritten, { ...options, elapsed });
    // A reset loses every variable, and the worker with them.
    this.#lastVariables = result.reset ? [] : result.variables;
    if (result.reset) this.#options.discardWorker();
    return result;
  }

  async #execute(worker: IsolateHandle, block: RewrittenBlock, options: RunOptions<Scope> & { elapsed: () => number }): Promise<ExecuteResult> {
    const { limits, onHostCall, onBlockWaiting } = this.#options;
    const { signal, elapsed } = options;
    const bridge = new HostCallBridge({ worker, scope: options.scope, onHostCall, onBlockWaiting });
    const watchdog = new BlockWatchdog(worker, {
      timeLimitMs: limits.blockTimeoutMs + DEFAULTS.sandbox.reportAllowanceMs + DEFAULTS.sandbox.watchdogGraceMs,
      rssLimitMb: limits.rssLimitMb ?? 2 * limits.memoryLimitMb + 2 * options.loadedContextMb + 512,
      hostWaitMs: () => bridge.waitedMs,
    });
    try {
      const { code, hasResult, wrapperLine, columnShifts } = block;
      const { outputLimitChars: outputLimit, blockTimeoutMs: timeoutMs } = limits;
      const command = { type: 'execute', code, hasResult, wrapperLine, columnShifts, timeoutMs, outputLimit, checkFinal: options.checkFinal ?? false } as const;
      const reply = await untilAborted(worker.request(command), signal);
      if (reply.type === 'failed') {
        if (reply.disposed) return resetResult('memory', { durationMs: elapsed(), limits });
        throw new SandboxError('sandbox_protocol_error', `The sandbox failed to run the block: ${reply.message}`);
      }
      if (reply.type !== 'executed') throw new SandboxError('sandbox_protocol_error', `Unexpected reply ${reply.type} to execute`);
      return this.#resultOf(() => blockResult(reply, { durationMs: elapsed(), limits }));
    } catch (error) {
      if (signal?.aborted && error === signal.reason) {
        this.#options.discardWorker();
        throw error;
      }
      if (error instanceof WorkerExitError) return resetResult(watchdog.verdict ?? 'crashed', { durationMs: elapsed(), limits, detail: error.causeText });
      throw error;
    } finally {
      watchdog.stop();
      bridge.close();
    }
  }

  /** The result for a block that found its isolate lost to a crash since the last one: it does not run. */
  crashedBetweenBlocks(crash: WorkerExitError): ExecuteResult {
    this.#lastVariables = [];
    return resetResult('crashed-between-blocks', { durationMs: 0, limits: this.#options.limits, detail: crash.causeText });
  }

  /** A worker that sent a malformed report cannot be trusted with the next block. */
  #resultOf(read: () => ExecuteResult): ExecuteResult {
    try {
      return read();
    } catch (error) {
      this.#options.discardWorker();
      throw error;
    }
  }
}
