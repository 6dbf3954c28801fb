import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/paths.js';
import { startFakeOpenAIServer, type FakeOpenAIServer, type FakeReply, type FakeRequest } from '../../src/testing.js';
import { eventually, isRunning, killSurvivors, workerPids, workersOnceOneSpins } from '../processes.js';
import { BIN, codeThenFinal } from './helpers.js';
import { repl } from '../repl.js';
import { tempFolder } from '../temp-folder.js';

const folder = tempFolder('rlm-cli-');

/** Root model "root" runs `code` once, then answers with FINAL from what it printed. Sub-model "sub" echoes. */
let rootScript: (request: FakeRequest) => FakeReply = () => 'FINAL(unused)';
let server: FakeOpenAIServer;
beforeAll(async () => {
  server = await startFakeOpenAIServer({
    reply: (request) => (request.body.model === 'sub' ? { content: `sub:${JSON.stringify(request.body.messages).length}` } : rootScript(request)),
  });
});
afterAll(() => server.close());

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** performance.now() when the process exited. */
  exitedAt: number;
}

interface CliOptions {
  stdin?: string;
  /** Leaves standard input open, as a terminal or an idle pipe would. */
  keepStdinOpen?: boolean;
  env?: Record<string, string>;
  onStderr?: (text: string, child: ChildProcess) => void;
}

function startRlm(args: string[], options: CliOptions = {}): { child: ChildProcess; result: Promise<CliResult> } {
  const env = { PATH: process.env.PATH ?? '', HOME: folder, ...options.env };
  const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  const result = new Promise<CliResult>((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    let exitedAt = 0;
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      options.onStderr?.(stderr, child);
    });
    child.on('error', reject);
    child.on('exit', () => (exitedAt = performance.now()));
    child.on('close', (code) => resolve({ code, stdout, stderr, exitedAt }));
  });
  if (!options.keepStdinOpen) child.stdin.end(options.stdin ?? '');
  return { child, result };
}

const rlm = (args: string[], options: CliOptions = {}) => startRlm(args, options).result;

/** The CLI's result if it exits within `ms`; otherwise it is killed and the test fails. */
async function exitWithin(run: ReturnType<typeof startRlm>, ms: number): Promise<CliResult> {
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    run.child.kill('SIGKILL');
  }, ms);
  const result = await run.result.finally(() => clearTimeout(timer));
  if (timedOut) throw new Error(`the CLI did not exit within ${ms} ms:\n${result.stderr}`);
  return result;
}

const base = () => ['run', '--base-url', server.baseURL, '--model', 'root', '--sub-model', 'sub'];
const textFile = (name: string, content: string) => {
  const path = join(folder, name);
  writeFileSync(path, content);
  return path;
};

describe('rlm run', () => {
  it('prints only the answer on stdout and progress on stderr', async () => {
    rootScript = codeThenFinal('print(context.length + "-chars")');
    const result = await rlm([...base(), '--context', textFile('a.txt', 'hello world'), 'How long is it?']);
    expect(result).toMatchObject({ code: 0, stdout: '11-chars\n' });
    expect(result.stderr).toContain('iteration 1/30');
  });

  it('prints one JSON object with --json', async () => {
    rootScript = codeThenFinal('print("json-answer")');
    const result = await rlm([...base(), '--context', textFile('b.txt', 'x'), '--json', '--query', 'q', '--log-dir', join(folder, 'logs')]);
    expect(result.code).toBe(0);
    const output = JSON.parse(result.stdout);
    expect(Object.keys(output)).toEqual(expect.arrayContaining(['response', 'usage', 'iterations', 'durationMs', 'forced', 'logPath']));
    expect(output).toMatchObject({ response: 'json-answer', iterations: 2, forced: false, usage: { calls: 2, byModel: { root: { calls: 2 } } } });
    expect(readFileSync(output.logPath, 'utf8').split('\n')[0]).toContain('"type":"metadata"');
  });

  it('prints a forced answer, and says it was forced in the last stderr line, --json and the log', async () => {
    rootScript = (request) => (JSON.stringify(request.body.messages).includes('You have used all your turns') ? 'Still looking.' : repl('print(1)'));
    const plain = await rlm([...base(), '--context', textFile('forced.txt', 'x'), '--max-iterations', '1', 'q']);
    expect(plain).toMatchObject({ code: 0, stdout: 'Still looking.\n' });
    expect(plain.stderr).toContain('iterations used up: asking for the best answer');
    expect(plain.stderr).toMatch(/done in [\d.]+s · answer forced: all 1 iterations used without a FINAL · 2 model calls/);
    const json = await rlm([...base(), '--context', textFile('forced.txt', 'x'), '--max-iterations', '1', '--json', '--log-dir', join(folder, 'forced-logs'), 'q']);
    const output = JSON.parse(json.stdout);
    expect(output).toMatchObject({ response: 'Still looking.', forced: true, iterations: 1 });
    const end = JSON.parse(readFileSync(output.logPath, 'utf8').trim().split('\n').at(-1)!);
    expect(end).toMatchObject({ type: 'run_end', status: 'completed', forced: true });
  });

  it('prints nothing on stderr with --quiet', async () => {
    rootScript = codeThenFinal('print("quiet")');
    const result = await rlm([...base(), '--context', textFile('c.txt', 'x'), '--quiet', 'q']);
    expect(result).toMatchObject({ code: 0, stdout: 'quiet\n', stderr: '' });
  });

  it('reads the context from stdin, folders, .json, .jsonl and several --context flags', async () => {
    rootScript = codeThenFinal('print(JSON.stringify(context))');
    const stdin = await rlm([...base(), '--context', '-', 'q'], { stdin: 'from stdin' });
    expect(stdin.stdout).toBe('from stdin\n');

    const dir = join(folder, 'docs');
    mkdirSync(join(dir, 'sub'), { recursive: true });
    mkdirSync(join(dir, 'node_modules'), { recursive: true });
    writeFileSync(join(dir, 'one.md'), 'first');
    writeFileSync(join(dir, 'sub', 'two.txt'), 'second');
    writeFileSync(join(dir, 'node_modules', 'skip.js'), 'skipped');
    writeFileSync(join(dir, 'image.bin'), Buffer.from([0, 1, 2]));
    const directory = await rlm([...base(), '--context', dir, 'q']);
    expect(JSON.parse(directory.stdout)).toEqual([{ path: 'one.md', content: 'first' }, { path: join('sub', 'two.txt'), content: 'second' }]);

    const json = textFile('data.json', '{"k": [1, 2]}');
    const jsonl = textFile('data.jsonl', '{"a": 1}\n\n{"a": 2}\n');
    const several = await rlm([...base(), '--context', json, '--context', jsonl, 'q']);
    expect(JSON.parse(several.stdout)).toEqual([{ k: [1, 2] }, [{ a: 1 }, { a: 2 }]]);
  });

  it('loads a 100 MB context file', async () => {
    const line = 'All work and no play makes Jack a dull boy. 0123456789\n';
    const path = textFile('big.txt', line.repeat(Math.ceil(100_000_000 / line.length)));
    rootScript = codeThenFinal('print(context.length)');
    const result = await rlm([...base(), '--context', path, '--quiet', 'How long?']);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(`${Math.ceil(100_000_000 / line.length) * line.length}\n`);
  });
});

describe('rlm run --setup', () => {
  it('gives model code host tools, called directly and by a sub-model through llm_query', async () => {
    const code = [
      'const direct = tools.get_stats({ question_id: "q2" });',
      'const viaModel = llm_query("Average of q1?", { tools: TOOLS, tool_handler });',
      'print(direct.average + "|" + viaModel)',
    ].join('\n');
    rootScript = codeThenFinal(code);
    let subCalls = 0;
    const toolServer = await startFakeOpenAIServer({
      reply: (request) => {
        if (request.body.model !== 'sub') return rootScript(request);
        subCalls++;
        const messages = request.body.messages as { role: string; content: string }[];
        const toolResult = messages.find((message) => message.role === 'tool');
        return toolResult ? `q1 is ${JSON.parse(toolResult.content).average}` : { toolCalls: [{ name: 'get_stats', arguments: { question_id: 'q1' } }] };
      },
    });
    try {
      const setup = join(packageRoot(), 'examples', 'stats-tools.ts');
      const result = await rlm(['run', '--base-url', toolServer.baseURL, '--model', 'root', '--sub-model', 'sub', '--setup', setup, '--context', textFile('survey.txt', 'responses'), '--verbose', 'Compare']);
      expect(result.stderr).toContain('tool get_stats');
      expect(result).toMatchObject({ code: 0, stdout: '3.8|q1 is 4.2\n' });
      expect(subCalls).toBe(2);
      const firstSubRequest = toolServer.requests.find((request) => request.body.model === 'sub')!;
      expect((firstSubRequest.body.tools as { function: { name: string } }[]).map((tool) => tool.function.name)).toEqual(['get_stats']);
    } finally {
      await toolServer.close();
    }
  });

  it('exits 2 with the file and line of a broken setup file', async () => {
    const broken = textFile('broken-setup.ts', 'export const tools = [\n  {,}\n];\n');
    const result = await rlm([...base(), '--setup', broken, '--context', textFile('j.txt', 'x'), 'q']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`${broken}:2:`);
  });
});

describe('stop signals', () => {
  const spin = () => textFile('spin.txt', 'x');

  it('exits 143 on SIGTERM during a CPU-bound block, with the sandboxes stopped and the log intact', async () => {
    rootScript = () => repl('while (true) {}');
    const logDir = join(folder, 'terminated-logs');
    const run = startRlm([...base(), '--context', spin(), '--block-timeout', '60', '--log-dir', logDir, 'q']);
    let workers: number[] = [];
    try {
      workers = await workersOnceOneSpins(run.child.pid!);
      run.child.kill('SIGTERM');
      const result = await exitWithin(run, 5_000);
      expect(result.code).toBe(143);
      expect(result.stderr).toContain('rlm: interrupted by SIGTERM; sandboxes stopped');
      const [log] = readdirSync(logDir);
      const lines = readFileSync(join(logDir, log!), 'utf8').trim().split('\n').map((line) => JSON.parse(line));
      expect(lines[0].type).toBe('metadata');
      expect(lines.at(-1)).toMatchObject({ type: 'run_end', status: 'interrupted' });
      expect(await eventually(() => !workers.some(isRunning), 2_000)).toBe(true);
    } finally {
      killSurvivors(workers);
    }
  });

  it('leaves no sandbox worker behind when the CLI is killed with SIGKILL during a CPU-bound block', async () => {
    rootScript = () => repl('while (true) {}');
    const run = startRlm([...base(), '--context', spin(), '--block-timeout', '60', 'q']);
    let workers: number[] = [];
    try {
      workers = await workersOnceOneSpins(run.child.pid!);
      run.child.kill('SIGKILL');
      await run.result;
      expect(await eventually(() => !workers.some(isRunning), 2_000)).toBe(true);
    } finally {
      killSurvivors(workers);
    }
  });

  it('stops waiting for standard input on SIGTERM', async () => {
    // Contexts load in order, after the CLI handles its signals: the notice about the Latin-1 file
    // comes just before standard input is read.
    const latin1 = join(folder, 'before-stdin.txt');
    writeFileSync(latin1, Buffer.from('café', 'latin1'));
    let noticed!: () => void;
    const reading = new Promise<void>((resolve) => (noticed = resolve));
    const run = startRlm([...base(), '--context', latin1, '--context', '-', 'q'], {
      keepStdinOpen: true,
      onStderr: (text) => text.includes('read it as Latin-1') && noticed(),
    });
    await reading;
    run.child.kill('SIGTERM');
    const result = await exitWithin(run, 3_000);
    expect(result.code).toBe(143);
    expect(result.stderr).toContain('rlm: interrupted by SIGTERM; nothing was run');
  });

  it('exits promptly after Ctrl-C while the model client waits out a retry-after', async () => {
    const limited = await startFakeOpenAIServer({ reply: () => ({ status: 429, headers: { 'retry-after': '20' } }) });
    try {
      const run = startRlm(['run', '--base-url', limited.baseURL, '--model', 'root', '--context', spin(), 'q']);
      expect(await eventually(() => limited.requests.length > 0, 5_000)).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      const signalled = performance.now();
      run.child.kill('SIGINT');
      const result = await exitWithin(run, 3_000);
      expect(result.code).toBe(130);
      expect(result.exitedAt - signalled).toBeLessThan(3_000);
    } finally {
      await limited.close();
    }
  });
});

describe('exit codes and errors', () => {
  it('exits 2 for an unknown flag', async () => {
    const result = await rlm(['run', '--no-such-flag']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("unknown option '--no-such-flag'");
  });

  it('exits 2 for a missing or bad argument, saying what to do', async () => {
    const noContext = await rlm([...base(), 'q']);
    expect(noContext.code).toBe(2);
    expect(noContext.stderr).toContain('Give the input with --context');
    const missing = await rlm([...base(), '--context', join(folder, 'nope.txt'), 'q']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(`Context file not found: ${join(folder, 'nope.txt')}`);
    const badNumber = await rlm([...base(), '--context', textFile('d.txt', 'x'), '--max-iterations', 'lots', 'q']);
    expect(badNumber.code).toBe(2);
    expect(badNumber.stderr).toContain('expected a whole number greater than 0');
    const tooSmall = await rlm([...base(), '--context', textFile('d2.txt', 'x'), '--memory-limit', '4', 'q']);
    expect(tooSmall.code).toBe(2);
    expect(tooSmall.stderr).toContain('--memory-limit 4: the sandbox needs at least 16 MB of heap (the limit is in MB).');
    const badJson = await rlm([...base(), '--context', textFile('bad.json', '{oops'), 'q']);
    expect(badJson.code).toBe(2);
    expect(badJson.stderr).toContain('is not valid JSON');
  });

  it('exits 2 when the API key is missing for a remote server', async () => {
    const result = await rlm(['run', '--base-url', 'https://api.example.com/v1', '--context', textFile('e.txt', 'x'), 'q']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('OPENAI_API_KEY is not set: pass --api-key');
  });

  it('uses a local OpenAI-compatible server when neither a key nor a base URL is given, and says which', async () => {
    // vLLM's default port; the other candidates (11434, 1234, 8080) have nothing listening here.
    const local = await startFakeOpenAIServer({ port: 8000, models: ['root'], reply: codeThenFinal('print(context.length)') });
    try {
      const result = await rlm(['run', '--sub-model', 'root', '--context', textFile('local.txt', 'abc'), 'q']);
      expect(result.stderr).toContain('rlm: no API key or base URL given: using vLLM at http://127.0.0.1:8000/v1 with model root');
      expect(result.code).toBe(0);
      expect(result.stdout).toBe('3\n');
    } finally {
      await local.close();
    }
  });

  it('lists the local servers it tried when none answers and no key is set', async () => {
    const result = await rlm(['run', '--context', textFile('nolocal.txt', 'x'), 'q']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('OPENAI_API_KEY is not set: pass --api-key');
    expect(result.stderr).toContain('No local server answered at http://127.0.0.1:11434/v1 (Ollama), http://127.0.0.1:1234/v1 (LM Studio), http://127.0.0.1:8080/v1 (llama.cpp server), http://127.0.0.1:8000/v1 (vLLM).');
  });

  it('exits 2 for an unreadable setup file', async () => {
    const result = await rlm([...base(), '--context', textFile('f.txt', 'x'), '--setup', join(folder, 'missing-setup.ts'), 'q']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('missing-setup.ts');
  });

  it('exits 1 and prints the flagged partial answer when a limit stops the run', async () => {
    rootScript = () => ({ content: 'Partial thoughts so far.\n' + repl('print(1)'), usage: { prompt_tokens: 2_000_000, completion_tokens: 0 } });
    const result = await rlm(['run', '--base-url', server.baseURL, '--model', 'gpt-4o', '--context', textFile('g.txt', 'x'), '--max-budget', '1', 'q']);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('Partial thoughts so far.');
    expect(result.stderr).toContain('Budget reached');
    expect(result.stderr).toContain('the answer above is partial');
    // With --json the partial answer is a field of the object, and nothing calls it "above".
    const json = await rlm(['run', '--base-url', server.baseURL, '--model', 'gpt-4o', '--context', textFile('g.txt', 'x'), '--max-budget', '1', '--json', 'q']);
    expect(JSON.parse(json.stdout)).toMatchObject({ partialAnswer: 'Partial thoughts so far.', error: { code: 'max_budget' } });
    expect(json.stderr).not.toContain('the answer above is partial');
  });

  it('exits 1 when the model keeps failing', async () => {
    rootScript = () => ({ status: 400, error: { message: 'model does not exist' } });
    const result = await rlm([...base(), '--context', textFile('h.txt', 'x'), '--json', 'q']);
    expect(result.code).toBe(1);
    expect(JSON.parse(result.stdout)).toMatchObject({ error: { code: 'model_error' }, partialAnswer: null });
  });

  it('exits 130 on Ctrl-C during a block, after stopping the sandbox and flushing the log', async () => {
    const logDir = join(folder, 'interrupted-logs');
    let sent = false;
    // The second iteration's block waits on a slow sub-call; Ctrl-C arrives while it runs.
    rootScript = (request) => {
      const turns = (request.body.messages as { content: string }[]).filter((message) => String(message.content).startsWith('Code executed')).length;
      return turns === 0 ? repl('print("step one")') : { content: repl('llm_query("slow")'), delayMs: 0 };
    };
    const slow = await startFakeOpenAIServer({
      reply: (request) => (request.body.model === 'sub' ? { content: 'late', delayMs: 30_000 } : rootScript(request)),
    });
    let workers: number[] = [];
    try {
      const result = await rlm(['run', '--base-url', slow.baseURL, '--model', 'root', '--sub-model', 'sub', '--context', textFile('i.txt', 'x'), '--log-dir', logDir, 'q'], {
        onStderr: (text, child) => {
          if (!sent && text.includes('iteration 2/30')) {
            sent = true;
            setTimeout(() => {
              workers = workerPids(child.pid);
              child.kill('SIGINT');
            }, 300);
          }
        },
      });
      expect(result.code).toBe(130);
      expect(result.stderr).toContain('rlm: interrupted by SIGINT; sandboxes stopped and the log is complete up to the last iteration: ');
      expect(result.stderr).toContain(join(folder, 'interrupted-logs'));
      const [log] = readdirSync(logDir);
      const lines = readFileSync(join(logDir, log!), 'utf8').trim().split('\n').map((line) => JSON.parse(line));
      expect(lines.map((line) => line.type)).toEqual(['metadata', 'iteration', 'run_end']);
      expect(lines[2]).toMatchObject({ status: 'interrupted' });
      expect(workers.length).toBeGreaterThan(0);
      expect(await eventually(() => !workers.some(isRunning), 2_000)).toBe(true);
    } finally {
      killSurvivors(workers);
      await slow.close();
    }
  });

  it('shows help with examples and exits 0', async () => {
    const top = await rlm(['--help']);
    expect(top.code).toBe(0);
    expect(top.stdout).toContain('rlm run --context big.txt');
    const run = await rlm(['run', '--help']);
    expect(run.code).toBe(0);
    for (const flag of ['--context', '--query', '--model', '--sub-model', '--base-url', '--api-key', '--max-iterations', '--max-depth', '--max-concurrency', '--max-budget', '--max-time', '--block-timeout', '--memory-limit', '--setup', '--system-prompt', '--log-dir', '--json', '--quiet', '--verbose']) {
      expect(run.stdout, flag).toContain(flag);
    }
    expect(run.stdout).toContain('Examples:');
  });
});
