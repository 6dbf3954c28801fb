import { readFileSync } from 'node:fs';
import { DEFAULTS, findLocalServer, LOCAL_SERVER_CANDIDATES, RLM, RlmError, RunFailedError, type PriceTable, type RLMOptions, type RlmResult } from '../index.js';
import { loadContexts } from './contexts.js';
import { ProgressView, type ProgressMode } from './progress.js';
import { Interruption } from './stop-signals.js';
import { EXIT, UsageError } from './usage-error.js';

/** The flags of `rlm run`, as commander parses them. */
export interface RunFlags {
  context?: string[];
  query?: string;
  model?: string;
  subModel?: string;
  baseUrl?: string;
  apiKey?: string;
  maxIterations?: number;
  maxDepth?: number;
  maxConcurrency?: number;
  maxBudget?: number;
  price?: PriceTable;
  requestTimeout?: number;
  idleTimeout?: number;
  maxTime?: number;
  blockTimeout?: number;
  memoryLimit?: number;
  setup?: string[];
  systemPrompt?: string;
  logDir?: string;
  json?: boolean;
  quiet?: boolean;
  verbose?: boolean;
}

export interface CommandIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  env: NodeJS.ProcessEnv;
  /** Rejects with the interrupt's reason when it is aborted: standard input may never end. */
  readStdin: () => Promise<string>;
  /** Aborted on Ctrl-C or SIGTERM, with an Interruption that says which. */
  interrupt: AbortSignal;
}

export const DEFAULT_MODEL = DEFAULTS.cli.model;

/** `rlm run`: answers one query and returns the exit code. */
export async function runCommand(positionalQuery: string | undefined, flags: RunFlags, io: CommandIo): Promise<number> {
  const query = flags.query ?? positionalQuery;
  const contexts = flags.context ?? [];
  if (contexts.length === 0) throw new UsageError('Give the input with --context <file|folder|->, e.g. rlm run --context report.txt "What changed?"');
  if (query !== undefined && query.trim() === '') throw new UsageError('The question is empty: pass it as the last argument or with --query.');

  const options = await buildOptions(flags, io);
  const rlm = new RLM(options);
  await rlm.prepare(); // setup files: a broken one is a usage error, reported before any model call
  let context: unknown;
  try {
    context = await loadContexts(contexts, io.readStdin);
  } catch (error) {
    if (io.interrupt.aborted) return reportInterruption(io, 'nothing was run');
    throw error;
  }

  const mode: ProgressMode = flags.quiet ? 'quiet' : io.stderr.isTTY ? 'live' : 'lines';
  const progress = new ProgressView(mode, io.stderr, Boolean(flags.verbose) && !flags.quiet);
  let result: RlmResult | undefined;
  try {
    for await (const event of rlm.stream({ context, query, signal: io.interrupt })) {
      progress.handle(event);
      if (event.type === 'run-end') result = event.result;
    }
  } catch (error) {
    progress.stop();
    if (io.interrupt.aborted) return reportInterruption(io, 'sandboxes stopped and the log is complete up to the last iteration');
    return reportFailure(error, flags, io);
  }
  progress.stop();
  if (!result) throw new Error('the run ended without a result');
  if (flags.json) {
    io.stdout.write(`${JSON.stringify(resultJson(result), null, 2)}\n`);
  } else {
    io.stdout.write(result.response.endsWith('\n') ? result.response : `${result.response}\n`);
  }
  return EXIT.ok;
}

async function buildOptions(flags: RunFlags, io: CommandIo): Promise<RLMOptions> {
  const { env } = io;
  let model = flags.model ?? env.RLM_MODEL;
  const subModel = flags.subModel ?? env.RLM_SUB_MODEL;
  let baseURL = flags.baseUrl ?? env.OPENAI_BASE_URL;
  const apiKey = flags.apiKey ?? env.OPENAI_API_KEY;
  if (!baseURL && !apiKey) {
    const local = await useLocalServer(io, model);
    baseURL = local.baseURL;
    model ??= local.model;
  }
  model ??= DEFAULT_MODEL;
  const sandbox = {
    ...(flags.blockTimeout !== undefined && { blockTimeoutMs: Math.round(flags.blockTimeout * 1000) }),
    ...(flags.memoryLimit !== undefined && { memoryLimitMb: flags.memoryLimit }),
  };
  return {
    model,
    ...(subModel && { subModel }),
    ...(baseURL && { baseURL }),
    ...(apiKey && { apiKey }),
    ...(flags.maxIterations !== undefined && { maxIterations: flags.maxIterations }),
    ...(flags.maxDepth !== undefined && { maxDepth: flags.maxDepth }),
    ...(flags.maxConcurrency !== undefined && { maxConcurrency: flags.maxConcurrency }),
    ...(flags.maxBudget !== undefined && { maxBudgetUsd: flags.maxBudget }),
    ...(flags.price && { prices: flags.price }),
    ...(flags.requestTimeout !== undefined && { requestTimeoutMs: Math.round(flags.requestTimeout * 1000) }),
    ...(flags.idleTimeout !== undefined && { idleTimeoutMs: Math.round(flags.idleTimeout * 1000) }),
    ...(flags.maxTime !== undefined && { maxTimeMs: Math.round(flags.maxTime * 1000) }),
    sandbox,
    ...(flags.setup && { setup: flags.setup }),
    ...(flags.systemPrompt && { systemPrompt: readPromptFile(flags.systemPrompt) }),
    ...(flags.logDir && { logDir: flags.logDir }),
  };
}

/**
 * With neither a key nor an endpoint, the user most likely runs a model on this machine: use the
 * first common local server that answers, and say which. When none does, say what was tried.
 */
async function useLocalServer(io: CommandIo, model: string | undefined): Promise<{ baseURL: string; model: string | undefined }> {
  const found = await findLocalServer();
  if (!found) {
    const tried = LOCAL_SERVER_CANDIDATES.map((candidate) => `${candidate.baseURL} (${candidate.name})`).join(', ');
    throw new UsageError(
      'OPENAI_API_KEY is not set: pass --api-key or set OPENAI_API_KEY, or pass --base-url for another OpenAI-compatible server. ' +
        `No local server answered at ${tried}.`,
    );
  }
  const chosen = model ?? found.models[0];
  io.stderr.write(`rlm: no API key or base URL given: using ${found.name} at ${found.baseURL}${chosen ? ` with model ${chosen}` : ''}\n`);
  return { baseURL: found.baseURL, model: chosen };
}

function readPromptFile(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new UsageError(`Cannot read --system-prompt file ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
}

/** Says which signal stopped the run and returns the exit code it calls for. */
function reportInterruption(io: CommandIo, outcome: string): number {
  const reason: unknown = io.interrupt.reason;
  const interruption = reason instanceof Interruption ? reason : undefined;
  io.stderr.write(`rlm: ${interruption?.message ?? 'interrupted'}; ${outcome}.\n`);
  return interruption?.exitCode ?? EXIT.interrupted;
}

/**
 * A run that failed or hit a limit: what it had goes to stdout (the partial answer, flagged on
 * stderr; or the --json failure object), the reason to stderr; exit 1.
 */
function reportFailure(error: unknown, flags: RunFlags, io: CommandIo): number {
  if (error instanceof RlmError && CONFIGURATION_CODES.has(error.code)) throw error; // main() reports it as a usage error (exit 2)
  const message = error instanceof Error ? error.message : String(error);
  const failure = error instanceof RunFailedError ? error : undefined;
  const partial = failure?.partialAnswer;
  if (flags.json) {
    io.stdout.write(`${JSON.stringify(failureJson(error, failure), null, 2)}\n`);
  } else if (partial) {
    io.stdout.write(`${partial.trimEnd()}\n`);
  }
  io.stderr.write(`rlm: the run stopped: ${message}\n`);
  if (!flags.json) {
    io.stderr.write(partial ? 'rlm: the answer above is partial (the best the run had so far).\n' : 'rlm: the run had no answer yet: its replies so far were code, not answers.\n');
  }
  if (failure?.logPath) io.stderr.write(`rlm: log: ${failure.logPath}\n`);
  return EXIT.failed;
}

const CONFIGURATION_CODES = new Set(['configuration_error', 'missing_api_key', 'usage_error']);

/** The --json shape of a failed run: what went wrong, what it had, what it cost. */
function failureJson(error: unknown, failure: RunFailedError | undefined) {
  const { name, message } = error instanceof Error ? error : { name: 'Error', message: String(error) };
  return {
    error: { name, code: error instanceof RlmError ? error.code : null, message },
    partialAnswer: failure?.partialAnswer ?? null,
    usage: failure?.usage?.byModel ?? {},
    costUsd: failure?.usage?.costUsd ?? 0,
    costComplete: failure?.usage?.costComplete ?? true,
    logPath: failure?.logPath ?? null,
  };
}

function resultJson(result: RlmResult) {
  return {
    response: result.response,
    usage: result.usage.byModel,
    costUsd: result.usage.costUsd,
    costComplete: result.usage.costComplete,
    iterations: result.iterations,
    durationMs: Math.round(result.durationMs),
    forced: result.forced,
    logPath: result.logPath ?? null,
  };
}
