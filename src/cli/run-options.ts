import { InvalidArgumentError, Option, type Command } from 'commander';
import { readFileSync } from 'node:fs';
import type { PriceTable, RLMOptions } from '../index.js';
import { mcpShorthand, readMcpConfigFile, type McpServerConfig } from '../tools/mcp-config.js';
import { UsageError } from './usage-error.js';

/** Flags that shape every run, shared by `rlm run` and `rlm serve`, as commander parses them. */
export interface RunOptionFlags {
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
  isolation?: 'isolate' | 'process';
  setup?: string[];
  systemPrompt?: string;
  logDir?: string;
  mcpConfig?: string[];
  mcp?: string[];
  contextWindow?: number;
  compactAt?: number;
  /** commander's `--no-compaction`: false when given. */
  compaction?: boolean;
}

export function number(kind: 'integer' | 'positive') {
  return (value: string) => {
    const parsed = Number(value);
    if (!Number.isFinite(parsed) || parsed <= 0 || (kind === 'integer' && !Number.isInteger(parsed))) {
      throw new InvalidArgumentError(kind === 'integer' ? 'expected a whole number greater than 0.' : 'expected a number greater than 0.');
    }
    return parsed;
  };
}

/** A TCP port; 0 asks for any free one. */
export function port(value: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 0 || parsed > 65_535) throw new InvalidArgumentError('expected a port number from 0 to 65535 (0: any free port).');
  return parsed;
}

function percent(value: string): number {
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed <= 0 || parsed > 100) throw new InvalidArgumentError('expected a percentage greater than 0 and at most 100.');
  return parsed;
}

export const collect = (value: string, previous: string[] | undefined) => [...(previous ?? []), value];

function collectPrice(value: string, previous: PriceTable | undefined): PriceTable {
  const match = /^(.+)=\s*([\d.]+)\s*,\s*([\d.]+)\s*$/.exec(value);
  const [inputPerMillion, outputPerMillion] = [Number(match?.[2]), Number(match?.[3])];
  if (!match || !Number.isFinite(inputPerMillion) || !Number.isFinite(outputPerMillion)) {
    throw new InvalidArgumentError('expected MODEL=IN,OUT in USD per million input and output tokens, e.g. gpt-5-mini=0.25,2.');
  }
  return { ...previous, [match[1]!.trim()]: { inputPerMillion, outputPerMillion } };
}

/** Adds the run flags to a command. */
export function addRunOptionFlags(command: Command): Command {
  return command
    .option('--base-url <url>', 'OpenAI-compatible endpoint (default: OPENAI_BASE_URL or OpenAI)')
    .option('--api-key <key>', 'API key (default: OPENAI_API_KEY; not needed for a server on localhost)')
    .option('--max-iterations <n>', 'root-model turns before the answer is forced (default: 30)', number('integer'))
    .option('--max-depth <n>', '1: no recursion; 2: rlm_query starts child RLMs (default: 1)', number('integer'))
    .option('--max-concurrency <n>', 'sub-model requests in flight at once (default: 16)', number('integer'))
    .option('--max-budget <usd>', 'stop a run when it has cost this much (every model needs a price)', number('positive'))
    .option('--price <model=in,out>', 'price of a model in USD per million input and output tokens, e.g. gpt-5-mini=0.25,2 (repeatable)', collectPrice)
    .option('--max-time <seconds>', 'stop a run after this long', number('positive'))
    .option('--block-timeout <seconds>', 'computation time one code block may use (default: 60)', number('positive'))
    .option('--request-timeout <seconds>', 'time one model request may take, reply included (default: 600)', number('positive'))
    .option('--idle-timeout <seconds>', 'seconds of silence, from the moment a model request is sent, before it is cut and retried; a reply comes whole, so a model slower than this to write one needs more (default: 120)', number('positive'))
    .option('--memory-limit <mb>', 'sandbox heap limit (default: 1024)', number('integer'))
    .addOption(new Option('--isolation <mode>', 'isolate: each run a fresh V8 isolate in shared worker processes (a crashing process ends the runs it hosts); process: each run a worker process of its own (default: isolate)').choices(['isolate', 'process']))
    .option('--setup <file>', 'setup file with tools or sandbox code (repeatable)', collect)
    .option('--system-prompt <file>', 'replace the built-in system prompt')
    .option('--log-dir <dir>', 'write a JSONL trajectory of each run into this folder')
    .option('--mcp-config <file>', 'mount the tools of the MCP servers in an mcpServers JSON file (repeatable)', collect)
    .option('--mcp <command>', 'mount the tools of one stdio MCP server, e.g. --mcp "npx -y @modelcontextprotocol/server-everything" (repeatable)', collect)
    .option('--context-window <tokens>', "tokens the root model can read (default: from the model's name, else 32768)", number('integer'))
    .option('--compact-at <pct>', 'compact a root conversation at this share of the context window (default: 85)', percent)
    .option('--no-compaction', 'never compact: a run whose conversation would overflow the window ends (context_window)');
}

/** The RLM options the run flags ask for (models aside). */
export function runOptionsFromFlags(flags: RunOptionFlags, env: NodeJS.ProcessEnv): Omit<RLMOptions, 'model' | 'subModel'> {
  const baseURL = checkedUrl(flags.baseUrl ?? env.OPENAI_BASE_URL, flags.baseUrl ? '--base-url' : 'OPENAI_BASE_URL');
  const apiKey = flags.apiKey ?? env.OPENAI_API_KEY;
  if (flags.memoryLimit !== undefined && flags.memoryLimit < MIN_MEMORY_MB) {
    throw new UsageError(`--memory-limit ${flags.memoryLimit}: the sandbox needs at least ${MIN_MEMORY_MB} MB of heap (the limit is in MB).`);
  }
  const sandbox = {
    ...(flags.blockTimeout !== undefined && { blockTimeoutMs: milliseconds(flags.blockTimeout, '--block-timeout') }),
    ...(flags.memoryLimit !== undefined && { memoryLimitMb: flags.memoryLimit }),
    ...(flags.isolation !== undefined && { isolation: flags.isolation }),
  };
  return {
    ...(baseURL && { baseURL }),
    ...(apiKey && { apiKey }),
    ...(flags.maxIterations !== undefined && { maxIterations: flags.maxIterations }),
    ...(flags.maxDepth !== undefined && { maxDepth: flags.maxDepth }),
    ...(flags.maxConcurrency !== undefined && { maxConcurrency: flags.maxConcurrency }),
    ...(flags.maxBudget !== undefined && { maxBudgetUsd: flags.maxBudget }),
    ...(flags.price && { prices: flags.price }),
    ...(flags.requestTimeout !== undefined && { requestTimeoutMs: milliseconds(flags.requestTimeout, '--request-timeout') }),
    ...(flags.idleTimeout !== undefined && { idleTimeoutMs: milliseconds(flags.idleTimeout, '--idle-timeout') }),
    ...(flags.maxTime !== undefined && { maxTimeMs: milliseconds(flags.maxTime, '--max-time') }),
    sandbox,
    ...(flags.setup && { setup: flags.setup }),
    ...(flags.systemPrompt && { systemPrompt: readPromptFile(flags.systemPrompt) }),
    ...(flags.logDir && { logDir: flags.logDir }),
    ...(flags.contextWindow !== undefined && { contextWindow: flags.contextWindow }),
    ...compactionFromFlags(flags),
    ...mcpServersFromFlags(flags),
  };
}

function mcpServersFromFlags(flags: RunOptionFlags): Pick<RLMOptions, 'mcpServers'> {
  if (!flags.mcpConfig && !flags.mcp) return {};
  const servers: Record<string, McpServerConfig> = {};
  const add = (name: string, config: McpServerConfig) => {
    let unique = name;
    for (let n = 2; unique in servers; n++) unique = `${name}_${n}`;
    servers[unique] = config;
  };
  for (const file of flags.mcpConfig ?? []) {
    let found: Record<string, McpServerConfig>;
    try {
      found = readMcpConfigFile(file);
    } catch (error) {
      throw new UsageError(`--mcp-config ${file}: ${(error as Error).message}.`);
    }
    for (const [name, config] of Object.entries(found)) add(name, config);
  }
  for (const commandLine of flags.mcp ?? []) {
    try {
      add(...mcpShorthand(commandLine));
    } catch (error) {
      throw new UsageError(`--mcp: ${(error as Error).message}.`);
    }
  }
  return { mcpServers: servers };
}

function compactionFromFlags(flags: RunOptionFlags): Pick<RLMOptions, 'compaction'> {
  if (flags.compaction === false) {
    if (flags.compactAt !== undefined) throw new UsageError('--compact-at and --no-compaction contradict each other: choose one.');
    return { compaction: false };
  }
  return flags.compactAt !== undefined ? { compaction: { thresholdPct: flags.compactAt } } : {};
}

function readPromptFile(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (error as Error).message;
    throw new UsageError(`Cannot read --system-prompt file ${path}: ${reason}.`);
  }
}

const MIN_MEMORY_MB = 16;

/** Seconds from a flag in whole milliseconds; what rounds to nothing is refused in the flag's terms. */
function milliseconds(seconds: number, flag: string): number {
  const ms = Math.round(seconds * 1000);
  if (ms < 1) throw new UsageError(`${flag} ${seconds}: the time is in seconds and must be at least 0.001 (one millisecond).`);
  return ms;
}

/** An endpoint must be a whole URL: "localhost:9/v1" would otherwise surface later as a key problem. */
function checkedUrl(value: string | undefined, source: string): string | undefined {
  if (value === undefined) return undefined;
  let parsed: URL | undefined;
  try {
    parsed = new URL(value);
  } catch {
    // reported below
  }
  if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) {
    throw new UsageError(`${source} ${value} is not an http(s) URL: write it in full, e.g. http://${value.replace(/^[a-z]+:\/\//i, '')}`);
  }
  return value;
}
