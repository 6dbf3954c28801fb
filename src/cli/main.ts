import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { RlmError, type PriceTable } from '../index.js';
import { DEFAULT_MODEL, runCommand, type CommandIo, type RunFlags } from './run-command.js';
import { EXIT } from './usage-error.js';

const RUN_EXAMPLES = `
Examples:
  $ rlm run --context report.txt "What are the three biggest risks?"
  $ rlm run --context logs/ --model gpt-5 --sub-model gpt-5-mini "Which service failed first, and why?"
  $ cat big.jsonl | rlm run --context - --json "How many records mention refunds?"
  $ rlm run --context a.txt --context b.txt --max-budget 0.50 "Compare the two contracts."
  $ rlm run --base-url http://localhost:11434/v1 --model llama3.1 --context notes.md "Summarize"

Context files: a text file becomes a string, .json is parsed, .jsonl becomes an array of records,
a folder becomes an array of { path, content }, and - reads standard input. Several --context
flags make an array.

Environment: OPENAI_API_KEY, OPENAI_BASE_URL, RLM_MODEL, RLM_SUB_MODEL (flags win).
Exit codes: 0 answer, 1 run failed or hit a limit (partial answer printed), 2 usage or
configuration error, 130 interrupted (Ctrl-C), 143 terminated (SIGTERM).`;

function number(kind: 'integer' | 'positive') {
  return (value: string) => {
    const parsed = Number(value);
    if (!Number.isFinite(parsed) || parsed <= 0 || (kind === 'integer' && !Number.isInteger(parsed))) {
      throw new InvalidArgumentError(kind === 'integer' ? 'expected a whole number greater than 0.' : 'expected a number greater than 0.');
    }
    return parsed;
  };
}

const collect = (value: string, previous: string[] | undefined) => [...(previous ?? []), value];

function collectPrice(value: string, previous: PriceTable | undefined): PriceTable {
  const match = /^(.+)=\s*([\d.]+)\s*,\s*([\d.]+)\s*$/.exec(value);
  const [inputPerMillion, outputPerMillion] = [Number(match?.[2]), Number(match?.[3])];
  if (!match || !Number.isFinite(inputPerMillion) || !Number.isFinite(outputPerMillion)) {
    throw new InvalidArgumentError('expected MODEL=IN,OUT in USD per million input and output tokens, e.g. gpt-5-mini=0.25,2.');
  }
  return { ...previous, [match[1]!.trim()]: { inputPerMillion, outputPerMillion } };
}

export function buildProgram(io: CommandIo, setExitCode: (code: number) => void): Command {
  const program = new Command('rlm')
    .description("Answer questions about inputs far larger than a model's context window.\nThe model explores the input by writing JavaScript in a sandboxed REPL.")
    .version(version(), '-V, --version')
    .showHelpAfterError('(run with --help for usage)')
    .configureOutput({ writeOut: (text) => io.stdout.write(text), writeErr: (text) => io.stderr.write(text) })
    .exitOverride();

  program
    .command('run')
    .description('answer a question about one or more context files')
    .argument('[question]', 'the question to answer (or use --query)')
    .option('-c, --context <path|->', 'input file, folder, or - for stdin (repeatable)', collect)
    .option('-q, --query <question>', 'the question (instead of the positional argument)')
    .addOption(new Option('-m, --model <name>', `root model that writes the code (default: RLM_MODEL or ${DEFAULT_MODEL})`))
    .addOption(new Option('--sub-model <name>', 'model for llm_query from code (default: RLM_SUB_MODEL or the root model)'))
    .option('--base-url <url>', 'OpenAI-compatible endpoint (default: OPENAI_BASE_URL or OpenAI)')
    .option('--api-key <key>', 'API key (default: OPENAI_API_KEY; not needed for a server on localhost)')
    .option('--max-iterations <n>', 'root-model turns before the answer is forced (default: 30)', number('integer'))
    .option('--max-depth <n>', '1: no recursion; 2: rlm_query starts child RLMs (default: 1)', number('integer'))
    .option('--max-concurrency <n>', 'sub-model requests in flight at once (default: 16)', number('integer'))
    .option('--max-budget <usd>', 'stop when the run has cost this much (every model needs a price)', number('positive'))
    .option('--price <model=in,out>', 'price of a model in USD per million input and output tokens, e.g. gpt-5-mini=0.25,2 (repeatable)', collectPrice)
    .option('--max-time <seconds>', 'stop the run after this long', number('positive'))
    .option('--block-timeout <seconds>', 'computation time one code block may use (default: 60)', number('positive'))
    .option('--request-timeout <seconds>', 'time one model request may take, reply included (default: 600)', number('positive'))
    .option('--idle-timeout <seconds>', 'silence in a model reply before the request is cut and retried (default: 120)', number('positive'))
    .option('--memory-limit <mb>', 'sandbox heap limit (default: 1024)', number('integer'))
    .option('--setup <file>', 'setup file with tools or sandbox code (repeatable)', collect)
    .option('--system-prompt <file>', 'replace the built-in system prompt')
    .option('--log-dir <dir>', 'write a JSONL trajectory of the run into this folder')
    .option('--json', 'print one JSON object: response, usage, costUsd, iterations, durationMs, forced, logPath')
    .option('--quiet', 'no progress output on stderr')
    .option('--verbose', 'also show the model replies and block outputs on stderr')
    .addHelpText('after', RUN_EXAMPLES)
    .action(async (question: string | undefined, flags: RunFlags) => {
      setExitCode(await runCommand(question, flags, io));
    });

  program.addHelpText(
    'after',
    `
Quick start:
  $ export OPENAI_API_KEY=sk-...
  $ rlm run --context big.txt "What is this document about?"

Run "rlm run --help" for every option.`,
  );
  return program;
}

/** Runs the CLI and returns its exit code. */
export async function main(argv: string[], io: CommandIo): Promise<number> {
  let exitCode: number = EXIT.ok;
  const program = buildProgram(io, (code) => {
    exitCode = code;
  });
  try {
    if (argv.length === 0) {
      program.outputHelp();
      return EXIT.ok;
    }
    await program.parseAsync(argv, { from: 'user' });
    return exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      return error.code === 'commander.helpDisplayed' || error.code === 'commander.version' || error.code === 'commander.help' ? EXIT.ok : EXIT.usage;
    }
    if (error instanceof RlmError && (error.code === 'usage_error' || error.code === 'configuration_error' || error.code === 'missing_api_key')) {
      io.stderr.write(`rlm: ${error.message}\n`);
      return EXIT.usage;
    }
    io.stderr.write(`rlm: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    return EXIT.failed;
  }
}

/** The package version, written into the bundle at build time (scripts/build.mjs). */
declare const __RLM_VERSION__: string;

function version(): string {
  return __RLM_VERSION__;
}
