import type { RlmEvent, RlmResult } from '../index.js';
import { formatCount } from '../format.js';

export type ProgressMode = 'live' | 'lines' | 'quiet';

interface Output {
  write(text: string): void;
  columns?: number;
}

/**
 * Shows a run's progress on stderr. `live` (a terminal) redraws one status line: iteration,
 * running block, sub-calls in flight and done, tokens, cost, elapsed time. `lines` (a pipe or a
 * log file) prints one plain line per step. `quiet` prints nothing. `verbose` adds the root
 * model's replies and each block's output.
 */
export class ProgressView {
  private readonly usage = { calls: 0, tokens: 0, costUsd: 0, costComplete: true };
  private readonly started = Date.now();
  private iteration = 0;
  private maxIterations = 0;
  private block: { iteration: number; index: number; started: number } | undefined;
  private subcallsQueued = 0;
  private readonly subcallsRunning = new Set<string>();
  private subcallsDone = 0;
  private childrenRunning = 0;
  private timer: NodeJS.Timeout | undefined;
  private statusShown = false;

  constructor(
    private readonly mode: ProgressMode,
    private readonly output: Output,
    private readonly verbose = false,
  ) {
    if (mode === 'live') {
      this.timer = setInterval(() => this.redraw(), 250);
      this.timer.unref();
    }
  }

  handle(event: RlmEvent): void {
    switch (event.type) {
      case 'run-start':
        if (event.depth === 0) this.line(`rlm: ${event.model}${event.query ? ` · ${truncate(event.query, 80)}` : ''}`);
        break;
      case 'iteration-start':
        if (event.depth !== 0) break;
        this.iteration = event.iteration;
        this.maxIterations = event.maxIterations;
        if (this.mode === 'lines') this.line(event.iteration > event.maxIterations ? 'iterations used up: asking for the best answer' : `iteration ${event.iteration}/${event.maxIterations}`);
        break;
      case 'llm-call-start':
      case 'llm-call-running':
      case 'llm-call-end':
        this.countCall(event);
        break;
      case 'code-start':
        if (event.depth === 0) this.block = { iteration: event.iteration, index: event.block + 1, started: Date.now() };
        break;
      case 'code-end':
        if (event.depth !== 0) break;
        if (this.mode === 'lines' || this.verbose || event.result.error) {
          const outcome = event.result.error ? `${event.result.error.name}: ${truncate(event.result.error.message, 120)}` : 'ok';
          this.line(`  block ${event.block + 1}: ${outcome} (${seconds(event.result.durationMs)})`);
        }
        if (this.verbose && event.result.stdout) this.line(indent(clip(event.result.stdout.trimEnd(), 2_000)));
        this.block = undefined;
        break;
      case 'subcall-start':
        this.childrenRunning++;
        break;
      case 'subcall-end':
        this.childrenRunning--;
        break;
      case 'tool-call-end':
        if (this.verbose) this.line(`  tool ${event.toolName}: ${event.error ? `error: ${event.error}` : truncate(event.result ?? '', 200)}`);
        break;
      case 'compaction':
        this.line(`${event.depth === 0 ? '' : `  child run (depth ${event.depth}): `}conversation compacted to fit ${formatCount(event.contextWindow)} tokens: ~${formatCount(event.tokensBefore)} -> ~${formatCount(event.tokensAfter)} tokens`);
        break;
      case 'final':
        if (event.depth === 0) this.line(`final answer (${event.source === 'forced' ? 'forced at the iteration limit' : `from ${event.source}`})`);
        break;
      case 'run-end':
        if (event.depth === 0) {
          this.stop();
          this.line(this.summary(event.result));
        }
        break;
      default:
        break;
    }
    if (this.mode === 'live') this.redraw();
  }

  /** Sub-calls queued, running and done; usage and cost of every call; the root's replies in verbose mode. */
  private countCall(event: Extract<RlmEvent, { type: 'llm-call-start' | 'llm-call-running' | 'llm-call-end' }>): void {
    if (event.type === 'llm-call-start') {
      if (event.purpose === 'sub') this.subcallsQueued++;
      return;
    }
    if (event.type === 'llm-call-running') {
      if (event.purpose === 'sub') {
        this.subcallsQueued--;
        this.subcallsRunning.add(event.callId);
      }
      return;
    }
    if (event.purpose === 'sub') {
      // A call that failed in the queue never ran.
      if (!this.subcallsRunning.delete(event.callId)) this.subcallsQueued--;
      this.subcallsDone++;
    }
    if (event.response) this.countUsage(event.response.usage, event.costUsd);
    if (event.purpose === 'root' && event.depth === 0 && this.verbose && event.response?.content) {
      this.line(`--- reply (iteration ${this.iteration}) ---\n${event.response.content.trimEnd()}`);
    }
  }

  /** Clears the status line; call before printing anything else to the terminal. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.clearStatus();
  }

  private countUsage(tokens: { inputTokens: number; outputTokens: number }, costUsd: number | null | undefined): void {
    this.usage.calls += 1;
    this.usage.tokens += tokens.inputTokens + tokens.outputTokens;
    if (costUsd === null || costUsd === undefined) this.usage.costComplete = false;
    else this.usage.costUsd += costUsd;
  }

  /** The last line; a forced answer is said there too, since the answer on stdout does not say it. */
  private summary(result: RlmResult): string {
    const { usage } = this;
    const forced = result.forced ? ` · answer forced: all ${result.iterations} iterations used without a FINAL` : '';
    return `done in ${seconds(Date.now() - this.started)}${forced} · ${usage.calls} model calls · ${formatTokens(usage.tokens)} tokens · ${formatCost(usage.costUsd, usage.costComplete)}`;
  }

  private status(): string {
    const { usage } = this;
    const parts = [this.iteration > this.maxIterations ? 'asking for the best answer' : `iteration ${this.iteration}/${this.maxIterations}`];
    if (this.block) parts.push(`block ${this.block.index} running ${seconds(Date.now() - this.block.started)}`);
    const queued = this.subcallsQueued > 0 ? `, ${this.subcallsQueued} queued` : '';
    parts.push(`sub-calls ${this.subcallsRunning.size} running${queued}, ${this.subcallsDone} done`);
    if (this.childrenRunning > 0) parts.push(`${this.childrenRunning} child runs`);
    parts.push(`${formatTokens(usage.tokens)} tokens`);
    // Before the first reply nothing says whether the models have prices: "$0.0000" would claim they do.
    if (usage.calls > 0) parts.push(formatCost(usage.costUsd, usage.costComplete));
    parts.push(seconds(Date.now() - this.started));
    return parts.join(' · ');
  }

  private line(text: string): void {
    if (this.mode === 'quiet') return;
    this.clearStatus();
    this.output.write(`${text}\n`);
  }

  private redraw(): void {
    if (this.mode !== 'live' || this.iteration === 0 || this.timer === undefined) return;
    // Some terminals report 0 columns: take that as unknown, not as room for nothing.
    const width = Math.max(20, (this.output.columns || 100) - 1);
    this.output.write(`\r\x1b[2K${truncate(this.status(), width)}`);
    this.statusShown = true;
  }

  private clearStatus(): void {
    if (this.statusShown) this.output.write('\r\x1b[2K');
    this.statusShown = false;
  }
}

export function truncate(text: string, length: number): string {
  const single = text.replace(/\s*\n\s*/g, ' ');
  return single.length > length ? `${single.slice(0, length - 1)}…` : single;
}

function clip(text: string, length: number): string {
  return text.length > length ? `${text.slice(0, length)}\n… (${text.length - length} more characters)` : text;
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((line) => `    ${line}`)
    .join('\n');
}

export function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)}s`;
}

export function formatTokens(count: number): string {
  if (count >= 1_000_000) return `${(count / 1_000_000).toFixed(1)}M`;
  if (count >= 1_000) return `${(count / 1_000).toFixed(1)}k`;
  return String(count);
}

export function formatCost(usd: number, complete: boolean): string {
  if (!complete && usd === 0) return 'cost unknown (no prices for these models)';
  const amount = `$${usd.toFixed(usd < 1 ? 4 : 2)}`;
  return complete ? amount : `${amount} + unpriced models`;
}
