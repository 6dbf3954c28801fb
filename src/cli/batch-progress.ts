import type { BatchEvent, TaskRecord } from '../index.js';
import { formatDuration } from '../format.js';
import { formatCost, formatTokens, truncate, type ProgressMode } from './progress.js';

interface Output {
  write(text: string): void;
  columns?: number;
}

/**
 * Shows a batch's progress on stderr. `live` (a terminal) redraws one status line: a bar, done /
 * failed / running / total, elapsed time, ETA, spend and tokens. `lines` (a pipe or a log file)
 * prints one line per finished task. `quiet` prints nothing.
 */
export class BatchProgress {
  private readonly started = Date.now();
  private done = 0;
  private failed = 0;
  private skipped = 0;
  private running = 0;
  private readonly spend = { usd: 0, complete: true, tokens: 0 };
  private readonly timer: NodeJS.Timeout | undefined;
  private statusShown = false;

  constructor(
    private readonly mode: ProgressMode,
    private readonly output: Output,
    private readonly total: number,
  ) {
    if (mode === 'live') {
      this.timer = setInterval(() => this.redraw(), 250);
      this.timer.unref();
    }
  }

  readonly handle = (event: BatchEvent): void => {
    if (event.type === 'task-start') this.running++;
    else if (event.type === 'task-skipped') this.skipped++;
    else if (event.type === 'task-end') this.finished(event.record);
    else if (this.mode !== 'quiet') this.print(`rlm: ${event.id ? `${event.id}: ` : ''}${event.text}`);
    if (this.mode === 'live') this.redraw();
  };

  /** Clears the status line; call before printing the summary. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.clearStatus();
  }

  private finished(record: TaskRecord): void {
    this.running--;
    if (record.status === 'completed') this.done++;
    else this.failed++;
    if (record.cost_usd === null) this.spend.complete = false;
    else this.spend.usd += record.cost_usd;
    this.spend.tokens += record.usage.input_tokens + record.usage.output_tokens;
    if (this.mode === 'lines') this.print(`rlm: ${this.finishedCount()}/${this.total} ${taskLine(record)}`);
  }

  private finishedCount(): number {
    return this.done + this.failed + this.skipped;
  }

  /** The time left, from the pace of the tasks run so far (skipped ones took no time). */
  private eta(): string {
    const ran = this.done + this.failed;
    const left = this.total - this.finishedCount();
    if (ran === 0 || left <= 0) return '?';
    return clock(((Date.now() - this.started) / ran) * left);
  }

  private status(width: number): string {
    const share = this.total === 0 ? 1 : this.finishedCount() / this.total;
    const barWidth = 20;
    const filled = Math.round(share * barWidth);
    const bar = `[${'#'.repeat(filled)}${'-'.repeat(barWidth - filled)}]`;
    const counts = `${this.finishedCount()}/${this.total} done · ${this.failed} failed · ${this.running} running`;
    const times = `${clock(Date.now() - this.started)} elapsed · ETA ${this.eta()}`;
    const spend = `${formatCost(this.spend.usd, this.spend.complete)} · ${formatTokens(this.spend.tokens)} tokens`;
    return truncate(`${bar} ${counts} · ${times} · ${spend}`, width);
  }

  private redraw(): void {
    this.output.write(`\r\x1b[2K${this.status(Math.max(20, (this.output.columns ?? 100) - 1))}`);
    this.statusShown = true;
  }

  private print(line: string): void {
    this.clearStatus();
    this.output.write(`${line}\n`);
  }

  private clearStatus(): void {
    if (this.statusShown) this.output.write('\r\x1b[2K');
    this.statusShown = false;
  }
}

function taskLine(record: TaskRecord): string {
  const cost = record.cost_usd === null ? 'cost unknown' : `$${record.cost_usd.toFixed(4)}`;
  const score = record.score === undefined ? '' : `, score ${record.score}`;
  const outcome = record.status === 'completed' ? 'completed' : `failed (${record.error?.code ?? 'error'}: ${truncate(record.error?.message ?? '', 120)})`;
  return `${record.id} ${outcome} in ${formatDuration(record.duration_ms)}, ${cost}${score}`;
}

/** A duration as a clock reads it: 42s, 3m05s, 1h02m. */
function clock(ms: number): string {
  const seconds = Math.round(ms / 1000);
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m${String(seconds % 60).padStart(2, '0')}s`;
  return `${Math.floor(minutes / 60)}h${String(minutes % 60).padStart(2, '0')}m`;
}
