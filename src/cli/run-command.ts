import { ConfigurationError, DEFAULTS, findLocalServer, LOCAL_SERVER_CANDIDATES, RLM, RlmError, RunFailedError, type RLMOptions, type RlmResult, type UsageSummary } from '../index.js';
import { describeError } from '../errors.js';
import { loadContexts, type ContextFormat } from '../inputs/contexts.js';
import { loadOutputSchemaFile } from './output-schema-file.js';
import { ProgressView, type ProgressMode } from './progress.js';
import { runOptionsFromFlags, type RunOptionFlags } from './run-options.js';
import { Interruption } from './stop-signals.js';
import type { CommandIo } from './io.js';
import { EXIT, isConfigurationProblem, UsageError } from './usage-error.js';

/** The flags of `rlm run`, as commander parses them. */
export interface RunFlags extends RunOptionFlags {
  context?: string[];
  format?: ContextFormat;
  query?: string;
  model?: string;
  subModel?: string;
  json?: boolean;
  /** A JSON Schema file, or a module exporting `schema`: the answer is a JSON value matching it. */
  outputSchema?: string;
  quiet?: boolean;
  verbose?: boolean;
}

/** `rlm run`: answers one query and returns the exit code. */
export async function runCommand(questionWords: string[], flags: RunFlags, io: CommandIo): Promise<number> {
  if (flags.query !== undefined && questionWords.length > 0) {
    throw new UsageError(`Give the question once: with --query or as words after the options, not both (got --query "${flags.query}" and "${questionWords.join(' ')}").`);
  }
  // An unquoted question arrives as several words; people mean one question.
  const query = flags.query ?? (questionWords.length > 0 ? questionWords.join(' ') : undefined);
  const contexts = flags.context ?? [];
  if (contexts.length === 0) throw new UsageError('Give the input with --context <file|folder|->, e.g. rlm run --context report.txt "What changed?"');
  if (query === undefined) throw new UsageError('Give the question as the last argument or with --query, e.g. rlm run --context report.txt "What changed?"');
  if (query.trim() === '') throw new UsageError('The question is empty: pass it as the last argument or with --query.');

  // What the user typed is checked before the configuration (key, endpoint, setup files): someone
  // with a mistyped path and no key yet hears about the path first.
  let context: unknown;
  try {
    const notice = (text: string) => io.stderr.write(`rlm: ${text}\n`);
    context = await loadContexts({ sources: contexts, readStdin: io.readStdin, format: flags.format, formatFlag: true, notice });
  } catch (error) {
    if (io.interrupt.aborted) return reportInterruption(io, 'nothing was run');
    throw error;
  }
  const output = flags.outputSchema === undefined ? undefined : await loadOutputSchemaFile(flags.outputSchema);
  const options = await buildOptions(flags, io);
  const rlm = new RLM(options);
  // Setup files: a broken one is a usage error, reported before any model call.
  for (const warning of (await rlm.prepare()).warnings ?? []) io.stderr.write(`rlm: ${warning}\n`);

  const mode: ProgressMode = flags.quiet ? 'quiet' : io.stderr.isTTY ? 'live' : 'lines';
  const progress = new ProgressView(mode, io.stderr, Boolean(flags.verbose) && !flags.quiet);
  let result: RlmResult | undefined;
  let logPath: string | undefined;
  let rootReplies = 0;
  try {
    for await (const event of rlm.stream({ context, query, signal: io.interrupt, ...(output && { output }) })) {
      progress.handle(event);
      if (event.type === 'run-start' && event.depth === 0) logPath = event.logPath;
      if (event.type === 'llm-call-end' && event.purpose === 'root' && event.depth === 0 && event.response) rootReplies++;
      if (event.type === 'run-end') result = event.result;
    }
  } catch (error) {
    progress.stop();
    if (io.interrupt.aborted) return reportInterruption(io, `sandboxes stopped${logPath ? ` and the log is complete up to the last iteration: ${logPath}` : ''}`);
    return reportFailure(error, { flags, io, rootReplies });
  }
  progress.stop();
  if (!result) throw new Error('the run ended without a result');
  if (flags.json) {
    io.stdout.write(`${JSON.stringify(resultJson(result, output !== undefined), null, 2)}\n`);
  } else {
    // With an output schema the response is the value's JSON, on one line (as JSON.stringify writes it).
    io.stdout.write(result.response.endsWith('\n') ? result.response : `${result.response}\n`);
    if (result.logPath) io.stderr.write(`rlm: log: ${result.logPath}\n`);
  }
  return EXIT.ok;
}

export async function buildOptions(flags: Pick<RunFlags, keyof RunOptionFlags | 'model' | 'subModel'>, io: CommandIo): Promise<RLMOptions> {
  const options = runOptionsFromFlags(flags, io.env);
  let model = flags.model ?? io.env.RLM_MODEL;
  const subModel = flags.subModel ?? io.env.RLM_SUB_MODEL;
  if (!options.baseURL && !options.apiKey) {
    const local = await useLocalServer(io, model);
    options.baseURL = local.baseURL;
    model ??= local.model;
  }
  return { ...options, model: model ?? DEFAULTS.cli.model, ...(subModel && { subModel }) };
}

/**
 * With neither a key nor an endpoint, the user most likely runs a model on this machine: use the
 * first common local server that answers, and say which. When none does, say what was tried.
 */
export async function useLocalServer(io: CommandIo, model: string | undefined): Promise<{ baseURL: string; model: string | undefined }> {
  const found = await findLocalServer();
  if (!found) {
    const tried = LOCAL_SERVER_CANDIDATES.map((candidate) => `${candidate.baseURL} (${candidate.name})`).join(', ');
    throw new ConfigurationError(
      'OPENAI_API_KEY is not set: pass --api-key or set OPENAI_API_KEY, or pass --base-url for another OpenAI-compatible server. ' +
        `No local server answered at ${tried}.`,
      { code: 'missing_api_key' },
    );
  }
  const chosen = model ?? found.models[0];
  io.stderr.write(`rlm: no API key or base URL given: using ${found.name} at ${found.baseURL}${chosen ? ` with model ${chosen}` : ''}\n`);
  return { baseURL: found.baseURL, model: chosen };
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
function reportFailure(error: unknown, { flags, io, rootReplies }: { flags: RunFlags; io: CommandIo; rootReplies: number }): number {
  if (isConfigurationProblem(error)) throw error; // main() reports it as a usage error (exit 2)
  const { message } = describeError(error);
  const failure = error instanceof RunFailedError ? error : undefined;
  const partial = failure?.partialAnswer;
  if (flags.json) {
    io.stdout.write(`${JSON.stringify(failureJson(error, failure), null, 2)}\n`);
  } else if (partial) {
    io.stdout.write(`${partial.trimEnd()}\n`);
  }
  io.stderr.write(`rlm: the run stopped: ${message}\n`);
  if (!flags.json) {
    io.stderr.write(`rlm: ${partial ? 'the answer above is partial (the best the run had so far)' : rootReplies > 0 ? 'the run had no answer yet: its replies so far were code, not answers' : 'the run had no answer: it stopped before the model replied'}.\n`);
  }
  if (failure?.logPath) io.stderr.write(`rlm: log: ${failure.logPath}\n`);
  return EXIT.failed;
}

/** The usage of a run that made no model call (it failed before its first). */
const NO_USAGE: UsageSummary = { byModel: {}, calls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0, costComplete: true };

/** The --json shape of a failed run: what went wrong, what it had, what it cost. */
function failureJson(error: unknown, failure: RunFailedError | undefined) {
  const { name, message } = describeError(error);
  return {
    error: { name, code: error instanceof RlmError ? error.code : null, message },
    partialAnswer: failure?.partialAnswer ?? null,
    usage: failure?.usage ?? NO_USAGE,
    logPath: failure?.logPath ?? null,
  };
}

function resultJson(result: RlmResult, withOutput: boolean) {
  return {
    response: result.response,
    ...(withOutput && { output: result.output }),
    usage: result.usage,
    iterations: result.iterations,
    durationMs: Math.round(result.durationMs),
    forced: result.forced,
    logPath: result.logPath ?? null,
  };
}
