// Only commander and small modules load here: `rlm --help` and `rlm --version` must start at
// once, and each command loads what it needs (the engine, the model client, the server) when it
// runs. The CLI uses the public API (src/index.ts); errors.ts and defaults.ts, which that API
// re-exports, are imported directly so this path stays small, and so is the worker pool, to
// start a sandbox worker before anything else.
import { Command, CommanderError, Option } from 'commander';
import { DEFAULTS } from '../defaults.js';
import { BATCH_EXAMPLES, RUN_EXAMPLES, SERVE_EXAMPLES } from './help.js';
import type { CommandIo } from './io.js';
import type { RunFlags } from './run-command.js';
import { addRunOptionFlags, collect, number, port } from './run-options.js';
import type { ServeFlags } from './serve-command.js';
import type { ViewFlags } from './view-pages.js';
import type { McpFlags } from './mcp-command.js';
import type { FakeServerFlags } from './fake-server-command.js';
import type { BatchQueueFlags, BatchStatusFlags } from './batch-queue-command.js';
import type { WorkerFlags } from './worker-command.js';
import { EXIT, isConfigurationProblem } from './usage-error.js';
import { addBatchGenerateCommand } from './batch-generate-command.js';


/** Where a command reports its exit code. */
type SetExitCode = (code: number) => void;

/** The `rlm` program and its commands (exported for tests of how arguments reach them). */
export function buildProgram(io: CommandIo, setExitCode: SetExitCode): Command {
  const program = new Command('rlm')
    .description("Answer questions about inputs far larger than a model's context window.\nThe model explores the input by writing JavaScript in a sandboxed REPL.")
    .version(version(), '-V, --version')
    .showHelpAfterError('(run with --help for usage)')
    // Each command's options belong to it: `rlm batch generate --out x` must reach `generate`.
    .enablePositionalOptions()
    .configureOutput({ writeOut: (text) => io.stdout.write(text), writeErr: (text) => io.stderr.write(text) })
    .exitOverride();
  for (const addCommand of [addRunCommand, addBatchCommand, addWorkerCommand, addServeCommand, addMcpCommand, addViewCommand, addFakeServerCommand]) addCommand(program, io, setExitCode);
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

function addRunCommand(program: Command, io: CommandIo, setExitCode: SetExitCode): void {
  const run = program
    .command('run')
    .description('answer a question about one or more context files')
    .argument('[question...]', 'the question to answer (or use --query); unquoted words are joined')
    .option('-c, --context <path|->', 'input file, folder, or - for stdin (repeatable)', collect)
    .addOption(new Option('--format <format>', 'read every context as text, json or jsonl (default: by file extension; stdin by content)').choices(['text', 'json', 'jsonl']))
    .option('-q, --query <question>', 'the question (instead of the positional argument)');
  addModelFlags(run);
  addRunOptionFlags(run)
    .option('--json', 'print one JSON object: response, usage (tokens and cost), iterations, durationMs, forced, logPath')
    .option('--output-schema <file>', 'the answer is JSON matching this schema: a JSON Schema .json file, or a .ts/.js module exporting `schema` (zod or JSON Schema); stdout is the value, on one line; --json adds it as output')
    .option('--quiet', 'no progress output on stderr')
    .option('--verbose', 'also show the model replies and block outputs on stderr')
    .addHelpText('after', RUN_EXAMPLES)
    .action(async (question: string[], flags: RunFlags) => {
      // Every run needs a sandbox worker, which takes about as long to start as the engine takes to
      // load: start it first, so the two overlap.
      startSandboxWorker(flags.isolation);
      const { runCommand } = await import('./run-command.js');
      setExitCode(await runCommand(question, flags, io));
    });
}

/**
 * `rlm batch TASKS.jsonl --out RESULTS.jsonl` runs a tasks file (the default action); subcommands
 * of `batch` (`rlm batch generate ...`) are added to the command this returns. Options are
 * positional, so that a subcommand's own flags (its --out) reach the subcommand, not `batch`.
 */
function addBatchCommand(program: Command, io: CommandIo, setExitCode: SetExitCode): void {
  const batch = program
    .command('batch')
    .description('run every task of a JSON Lines file (resumable), then print cost and accuracy')
    .enablePositionalOptions()
    .argument('<tasks.jsonl>', 'one task a line: {"id", "query", "context" | "context_path" | "context_paths", "expected"?, ...} or OpenAI Batch API lines')
    .option('--out <file>', 'the results file: one JSON line per finished task; running again skips completed tasks')
    .option('--concurrency <n>', `tasks running at once (default: ${DEFAULTS.batch.concurrency})`, number('integer'))
    .option('--task-budget <usd>', 'stop a task when it has cost this much (every model needs a price)', number('positive'))
    .option('--scorer <name|file>', 'score answers of tasks with "expected": exact, contains, number, json, or a module exporting score() (default: exact)')
    .option('--data-dir <dir>', "folder context paths are relative to (default: the tasks file's folder)")
    .option('--retry-failed', 'also run again the tasks whose last result failed')
    .option('--quiet', 'no progress output on stderr')
    .option('--json', 'print the summary as one JSON object');
  addQueueFlags(batch);
  addModelFlags(batch);
  addRunOptionFlags(batch)
    .addHelpText('after', BATCH_EXAMPLES)
    .action(async (tasksPath: string, flags: BatchQueueFlags) => {
      if (flags.queue !== undefined) {
        const { batchQueueCommand } = await import('./batch-queue-command.js');
        setExitCode(await batchQueueCommand(tasksPath, flags, io));
        return;
      }
      startSandboxWorker(flags.isolation);
      const { batchCommand } = await import('./batch-command.js');
      setExitCode(await batchCommand(tasksPath, flags, io));
    });
  addBatchGenerateCommand(batch);
  addBatchStatusCommand(batch, io, setExitCode);
}

function addServeCommand(program: Command, io: CommandIo, setExitCode: SetExitCode): void {
  const serve = program
    .command('serve')
    .description('serve RLM as an OpenAI-compatible model: POST /v1/chat/completions and /v1/responses')
    .option('--host <address>', 'address to listen on (default: 127.0.0.1; others need --auth-token)')
    .option('--port <n>', `port to listen on (default: ${DEFAULTS.server.port}; 0: any free port)`, port)
    .option('--auth-token <token>', 'clients must send it as a bearer token (default: RLM_AUTH_TOKEN)')
    .option('--max-concurrent-runs <n>', 'runs answered at once, background ones included; more get 429 (default: 32)', number('integer'))
    .option('--max-body-mb <mb>', 'largest request body (default: 256)', number('positive'))
    .option('--paused-run-ttl <seconds>', 'how long a run waits for tool results from its caller (default: 600)', number('positive'))
    .option('--response-ttl <seconds>', 'how long a finished response stays readable at /v1/responses/{id} (default: 3600)', number('positive'));
  addRunOptionFlags(serve)
    .addHelpText('after', SERVE_EXAMPLES)
    .action(async (flags: ServeFlags) => {
      const { serveCommand } = await import('./serve-command.js');
      setExitCode(await serveCommand(flags, io));
    });
}

function addMcpCommand(program: Command, io: CommandIo, setExitCode: SetExitCode): void {
  const mcp = program.command('mcp').description('serve rlm to assistants as an MCP server over stdio: tool rlm_completion');
  addModelFlags(mcp);
  addRunOptionFlags(mcp).action(async (flags: McpFlags) => {
    startSandboxWorker(flags.isolation);
    const { mcpCommand } = await import('./mcp-command.js');
    setExitCode(await mcpCommand(flags, io, version()));
  });
}

function addViewCommand(program: Command, io: CommandIo, setExitCode: SetExitCode): void {
  program
    .command('view')
    .description('turn a run log (--log-dir), or the results of rlm batch, into one self-contained HTML page')
    .argument('<log.jsonl>', 'a trajectory written by rlm run --log-dir or by the reference RLM logger, or a results file of rlm batch')
    .option('--out <file>', 'where to write the page (default: the log path with .html); a batch page gets its trajectory pages in <page>-trajectories/')
    .option('--serve', 'serve the page on 127.0.0.1 instead, and print its URL')
    .option('--follow', 'with --serve: update the page while the run is still writing the log')
    .option('--port <n>', 'with --serve: the port (default: any free port)', port)
    .option('--open', 'also open the page in a browser, where one is available')
    .action(async (logPath: string, flags: ViewFlags) => {
      const { viewCommand } = await import('./view-command.js');
      setExitCode(await viewCommand(logPath, flags, io));
    });
}

function addFakeServerCommand(program: Command, io: CommandIo, setExitCode: SetExitCode): void {
  program
    .command('fake-server')
    .description('try rlm offline: a scripted model that explores the context as an RLM does (no model, no key)')
    .option('--port <n>', 'port on 127.0.0.1 (default: any free port)', port)
    .action(async (flags: FakeServerFlags) => {
      const { fakeServerCommand } = await import('./fake-server-command.js');
      setExitCode(await fakeServerCommand(flags, io));
    });
}

/** `rlm batch --queue`: the tasks go to `rlm worker`s through Redis instead of running here. */
function addQueueFlags(batch: Command): void {
  batch
    .option('--queue <url>', 'run the tasks on rlm workers through this Redis: redis://[:PASSWORD@]HOST:PORT[/DB], or rediss:// for TLS')
    .option('--name <batch>', `with --queue: the batch's name, which its workers are given too (default: ${DEFAULTS.queue.batchName})`)
    .option('--attempts <n>', `tries of a task whose failure may pass, e.g. an upstream still failing after rlm's retries (default: ${DEFAULTS.batch.attempts})`, number('integer'))
    .option('--retry-delay <seconds>', `with --queue: wait before the second try, doubled for each next one (default: ${DEFAULTS.queue.backoffMs / 1000})`, number('positive'))
    .option('--max-inline-mb <mb>', `with --queue: largest task line sent through Redis, compressed; put bigger contexts in files or at URLs (default: ${DEFAULTS.queue.maxInlineBytes / 2 ** 20})`, number('positive'));
}

function addBatchStatusCommand(batch: Command, io: CommandIo, setExitCode: SetExitCode): void {
  batch
    .command('status')
    .description('the figures of a batch queued with --queue: waiting, active, completed, failed, workers, spend, throughput, ETA')
    .option('--queue <url>', 'the Redis of the batch: redis://[:PASSWORD@]HOST:PORT[/DB]')
    .option('--name <batch>', `the batch (default: ${DEFAULTS.queue.batchName})`)
    .option('--json', 'print one JSON object')
    .action(async (flags: BatchStatusFlags) => {
      const { batchStatusCommand } = await import('./batch-queue-command.js');
      setExitCode(await batchStatusCommand(flags, io));
    });
}

function addWorkerCommand(program: Command, io: CommandIo, setExitCode: SetExitCode): void {
  const worker = program
    .command('worker')
    .description("run the tasks of a batch queued in Redis (rlm batch --queue), with this machine's models, key and files")
    .option('--queue <url>', 'the Redis of the batch: redis://[:PASSWORD@]HOST:PORT[/DB], or rediss:// for TLS')
    .option('--name <batch>', `the batch to work for (default: ${DEFAULTS.queue.batchName})`)
    .option('--concurrency <n>', `tasks run at once (default: ${DEFAULTS.queue.concurrency})`, number('integer'))
    .option('--data-dir <dir>', "where the tasks' context paths and a scorer module are read from (default: the working directory)")
    .option('--grace <seconds>', `after SIGTERM or Ctrl-C, how long running tasks may take to finish before they go back to the queue (default: ${DEFAULTS.queue.graceMs / 1000})`, number('positive'))
    .option('--lock-duration <seconds>', `a task of a worker that stops answering goes to another after this long (default: ${DEFAULTS.queue.lockDurationMs / 1000})`, number('positive'))
    .option('--stalled-interval <seconds>', `how often to look for tasks of workers that died (default: ${DEFAULTS.queue.stalledIntervalMs / 1000})`, number('positive'))
    .option('--quiet', 'no progress output on stderr');
  addModelFlags(worker);
  addRunOptionFlags(worker).action(async (flags: WorkerFlags) => {
    startSandboxWorker(flags.isolation);
    const { workerCommand } = await import('./worker-command.js');
    setExitCode(await workerCommand(flags, io));
  });
}

/** The flags that name the models, for the commands that start runs of their own. */
function addModelFlags(command: Command): void {
  command
    .addOption(new Option('-m, --model <name>', `root model that writes the code (default: RLM_MODEL or ${DEFAULTS.cli.model})`))
    .addOption(new Option('--sub-model <name>', 'model for llm_query from code (default: RLM_SUB_MODEL or the root model)'));
}

function startSandboxWorker(isolation: 'isolate' | 'process' | undefined): void {
  void import('../sandbox/pool.js').then(({ workerPool }) => workerPool.refill(isolation));
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
        io.stderr.write(`rlm: a command comes first: did you mean "rlm run ${argv.join(' ')}"? (commands: run, batch, worker, serve, mcp, view, fake-server)\n`);
      }
      return error.code === 'commander.helpDisplayed' || error.code === 'commander.version' || error.code === 'commander.help' ? EXIT.ok : EXIT.usage;
    }
    if (isConfigurationProblem(error)) {
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
