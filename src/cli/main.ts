import { Command, CommanderError, Option } from 'commander';
import { RlmError } from '../index.js';
import { addRunOptionFlags, collect } from './run-options.js';
import { DEFAULT_MODEL, runCommand, type CommandIo, type RunFlags } from './run-command.js';
import { number, port } from './run-options.js';
import { serveCommand, SERVE_EXAMPLES, type ServeFlags } from './serve-command.js';
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

export function buildProgram(io: CommandIo, setExitCode: (code: number) => void): Command {
  const program = new Command('rlm')
    .description("Answer questions about inputs far larger than a model's context window.\nThe model explores the input by writing JavaScript in a sandboxed REPL.")
    .version(version(), '-V, --version')
    .showHelpAfterError('(run with --help for usage)')
    .configureOutput({ writeOut: (text) => io.stdout.write(text), writeErr: (text) => io.stderr.write(text) })
    .exitOverride();

  const run = program
    .command('run')
    .description('answer a question about one or more context files')
    .argument('[question...]', 'the question to answer (or use --query); unquoted words are joined')
    .option('-c, --context <path|->', 'input file, folder, or - for stdin (repeatable)', collect)
    .addOption(new Option('--format <format>', 'read every context as text, json or jsonl (default: by file extension; stdin by content)').choices(['text', 'json', 'jsonl']))
    .option('-q, --query <question>', 'the question (instead of the positional argument)')
    .addOption(new Option('-m, --model <name>', `root model that writes the code (default: RLM_MODEL or ${DEFAULT_MODEL})`))
    .addOption(new Option('--sub-model <name>', 'model for llm_query from code (default: RLM_SUB_MODEL or the root model)'));
  addRunOptionFlags(run)
    .option('--json', 'print one JSON object: response, usage, costUsd, iterations, durationMs, forced, logPath')
    .option('--quiet', 'no progress output on stderr')
    .option('--verbose', 'also show the model replies and block outputs on stderr')
    .addHelpText('after', RUN_EXAMPLES)
    .action(async (question: string[], flags: RunFlags) => {
      setExitCode(await runCommand(question, flags, io));
    });

  const serve = program
    .command('serve')
    .description('serve RLM as an OpenAI-compatible model: POST /v1/chat/completions')
    .option('--host <address>', 'address to listen on (default: 127.0.0.1; others need --auth-token)')
    .option('--port <n>', 'port to listen on (default: 8000; 0: any free port)', port)
    .option('--auth-token <token>', 'clients must send it as a bearer token (default: RLM_AUTH_TOKEN)')
    .option('--max-concurrent-runs <n>', 'chat completions answered at once; more get 429 (default: 32)', number('integer'))
    .option('--max-body-mb <mb>', 'largest request body (default: 256)', number('positive'))
    .option('--paused-run-ttl <seconds>', 'how long a run waits for tool results from its caller (default: 600)', number('positive'));
  addRunOptionFlags(serve)
    .addHelpText('after', SERVE_EXAMPLES)
    .action(async (flags: ServeFlags) => {
      setExitCode(await serveCommand(flags, io));
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
      if (error.code === 'commander.unknownOption' && argv[0]?.startsWith('-')) {
        io.stderr.write(`rlm: a command comes first: did you mean "rlm run ${argv.join(' ')}"? (commands: run, serve)\n`);
      }
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
