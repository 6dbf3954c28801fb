// The reference Python RLM (the `rlm` package), measured by bench/reference.py in the same run and
// against the same kind of local fake server as rlm, when RLM_REFERENCE_PYTHON names a Python
// interpreter that can import it. Nothing is assumed about it otherwise: its cells say why.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startServerProcess } from './fake-server.js';
import { ratio } from './report.js';

const HARNESS = fileURLToPath(new URL('./reference.py', import.meta.url));
const TIMEOUT_MS = 300_000;

export type Reference = { figures: Record<string, number> } | { missing: string };

const SKIPPED: Reference = { missing: 'skipped (set RLM_REFERENCE_PYTHON)' };

/** Sequential llm_query per call (`sequentialMsPerCall`) and one llm_query_batched (`batchedMs`). */
export function referenceSubcalls(options: { fastURL: string; slowURL: string; calls: number; prompts: number }): Reference {
  return runHarness(['subcalls', options.fastURL, options.slowURL, String(options.calls), String(options.prompts)]);
}

/** `contextLoadMs`: one string context of `megabytes` loaded into the REPL environment. */
export async function referenceContextLoad(megabytes: number): Promise<Reference> {
  if (!process.env.RLM_REFERENCE_PYTHON) return SKIPPED;
  // The reference RLM cannot be created without a model to point at, though loading makes no call.
  const server = await startServerProcess(0);
  try {
    return runHarness(['context', server.baseURL, String(megabytes)]);
  } finally {
    server.close();
  }
}

/** The reference's figure for a cell, or why there is none. */
export function referenceCell(reference: Reference, figure: string, format: (value: number) => string): string {
  if ('missing' in reference) return reference.missing;
  const value = reference.figures[figure];
  return value === undefined ? `failed: the harness gave no ${figure}` : format(value);
}

/** rlm's figure over the reference's, when there is one. */
export function referenceRatio(value: number, reference: Reference, figure: string): string {
  const referenceValue = 'figures' in reference ? reference.figures[figure] : undefined;
  return referenceValue === undefined ? '' : ratio(value, referenceValue);
}

function runHarness(args: string[]): Reference {
  const python = process.env.RLM_REFERENCE_PYTHON;
  if (!python) return SKIPPED;
  const result = spawnSync(python, [HARNESS, ...args], { encoding: 'utf8', timeout: TIMEOUT_MS, maxBuffer: 1 << 24 });
  if (result.error) return failed(startFailure(python, result.error));
  const reply = lastJsonLine(result.stdout);
  if (reply && typeof reply.error === 'string') return failed(reply.error);
  if (result.status !== 0 || !reply) return failed(lastLine(result.stderr) || `${python} exited with ${result.status ?? result.signal}`);
  return { figures: reply as Record<string, number> };
}

function startFailure(python: string, error: NodeJS.ErrnoException): string {
  if (error.code === 'ETIMEDOUT') return `no answer within ${TIMEOUT_MS / 1000} s`;
  if (error.code === 'ENOENT') return `${python} not found`;
  return error.message;
}

function failed(reason: string): Reference {
  return { missing: `failed: ${reason}` };
}

function lastLine(text: string): string {
  return text.trim().split('\n').at(-1)?.trim() ?? '';
}

function lastJsonLine(stdout: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(lastLine(stdout));
    return value && typeof value === 'object' ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
