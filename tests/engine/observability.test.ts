import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigurationError, RLM, RunFailedError, Sandbox, type IterationRecord, type RlmEvent } from '../../src/index.js';
import { deferred } from '../deferred.js';
import { eventually, workerPids } from '../processes.js';
import { models } from './helpers.js';
import { rejectionOf, thrownBy } from '../rejection.js';
import { repl } from '../repl.js';
import { tempFolder } from '../temp-folder.js';

describe('events', () => {
  it('streams typed events in order, and completion() returns what run-end carries', async () => {
    const script = [repl('const a = llm_query("q")'), repl('FINAL(a)')];
    const first = models(script, ['sub answer']);
    const events: RlmEvent[] = [];
    for await (const event of new RLM({ model: 'root', subModel: 'sub', languageModel: first.languageModel }).stream('c')) events.push(event);
    expect(events.map((event) => event.type)).toEqual([
      'run-start',
      'iteration-start', 'llm-call-start', 'llm-call-running', 'llm-call-end', 'code-start', 'llm-call-start', 'llm-call-running', 'llm-call-end', 'code-end', 'iteration-end',
      'iteration-start', 'llm-call-start', 'llm-call-running', 'llm-call-end', 'code-start', 'code-end', 'iteration-end',
      'final',
      'run-end',
    ]);
    const subCall = events.find((event) => event.type === 'llm-call-end' && event.purpose === 'sub');
    expect(subCall).toMatchObject({ depth: 0, model: 'sub', response: { content: 'sub answer' } });
    const end = events.at(-1) as Extract<RlmEvent, { type: 'run-end' }>;
    const second = models(script, ['sub answer']);
    const result = await new RLM({ model: 'root', subModel: 'sub', languageModel: second.languageModel }).completion('c');
    expect(result.response).toBe(end.result.response);
    expect(result.iterations).toBe(end.result.iterations);
  });

  it('emits an error event, then throws from the stream', async () => {
    const { languageModel } = models([new Error('root model unavailable')]);
    const seen: string[] = [];
    const failure = await rejectionOf(
      (async () => {
        for await (const event of new RLM({ model: 'root', languageModel }).stream('c')) seen.push(event.type);
      })(),
      RunFailedError,
    );
    expect(failure).toMatchObject({ code: 'run_failed', message: expect.stringContaining('root model unavailable') });
    expect(seen).toEqual(['run-start', 'iteration-start', 'llm-call-start', 'llm-call-running', 'llm-call-end', 'error']);
  });

  it('awaits onIteration before the next turn, and calls onRequest for every sub-call', async () => {
    const order: string[] = [];
    const { languageModel } = models(
      async () => {
        order.push('root call');
        return order.filter((entry) => entry === 'root call').length === 1 ? repl('llm_query_batched(["x", "y"])') : repl('FINAL(1)');
      },
      () => 'ok',
    );
    const requests: string[] = [];
    await new RLM({
      model: 'root',
      subModel: 'sub',
      languageModel,
      onIteration: async (iteration: IterationRecord, index: number) => {
        await new Promise((resolve) => setTimeout(resolve, 50));
        order.push(`checkpoint ${index} (${iteration.codeBlocks.length} block)`);
      },
      onRequest: (request, response) => requests.push(`${request.model}:${response?.content}`),
    }).completion('c');
    expect(order).toEqual(['root call', 'checkpoint 1 (1 block)', 'root call', 'checkpoint 2 (1 block)']);
    expect(requests).toEqual(['sub:ok', 'sub:ok']);
  });

  it('reports the forced last iteration like any other: iteration-start, iteration-end and onIteration', async () => {
    const { languageModel } = models([repl('print(1)'), 'My best answer: 3']);
    const checkpoints: number[] = [];
    const events: RlmEvent[] = [];
    const rlm = new RLM({ model: 'root', languageModel, maxIterations: 1, onIteration: (_iteration: IterationRecord, index: number) => void checkpoints.push(index) });
    for await (const event of rlm.stream('c')) events.push(event);
    expect(checkpoints).toEqual([1, 2]);
    const iterationEvents = events.filter((event) => event.type === 'iteration-start' || event.type === 'iteration-end' || event.type === 'final');
    expect(iterationEvents.map((event) => `${event.type}${'iteration' in event ? ` ${event.iteration}` : ''}`)).toEqual([
      'iteration-start 1', 'iteration-end 1', 'iteration-start 2', 'iteration-end 2', 'final',
    ]);
    const forcedEnd = iterationEvents[3] as Extract<RlmEvent, { type: 'iteration-end' }>;
    expect(forcedEnd.record).toMatchObject({ index: 2, response: 'My best answer: 3', finalAnswer: 'My best answer: 3' });
    expect(events.at(-1)).toMatchObject({ type: 'run-end', result: { forced: true, iterations: 1 } });
  });

  it('cancels the run when the consumer stops reading the stream', async () => {
    const { subModel, languageModel } = models([repl('llm_query("slow")')], () => ({ content: 'late', delayMs: 10_000 }));
    await Sandbox.prewarm();
    const spares = workerPids().length;
    const started = Date.now();
    for await (const event of new RLM({ model: 'root', subModel: 'sub', languageModel }).stream('c')) {
      if (event.type === 'code-start') break;
    }
    // The run stops: its sandbox goes away (only the pool's spares are left) and nothing waits on the slow call.
    expect(await eventually(() => workerPids().length <= spares, 4_000)).toBe(true);
    expect(subModel.calls.length).toBeLessThanOrEqual(1);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('disposes every sandbox when a run is cancelled (seen as worker processes, with process isolation)', async () => {
    const controller = new AbortController();
    const subAsked = deferred();
    const slowSub = () => {
      subAsked.resolve();
      return { content: 'late', delayMs: 10_000 };
    };
    const { languageModel } = models([repl('llm_query("slow")')], slowSub);
    await Sandbox.prewarm(1, { isolation: 'process' });
    const spares = workerPids().length;
    const run = new RLM({ model: 'root', subModel: 'sub', languageModel, sandbox: { isolation: 'process' } }).completion({ context: 'c', signal: controller.signal });
    await subAsked.promise; // the run's block is waiting on the sub-call: its sandbox is running
    const during = workerPids().length;
    const stop = new Error('stop');
    controller.abort(stop);
    expect(await rejectionOf(run, Error)).toBe(stop); // a cancelled run rejects with its caller's reason as it is
    expect(await eventually(() => workerPids().length < during, 4_000)).toBe(true);
    expect(workerPids().length).toBeLessThanOrEqual(spares); // only the pool's spares
  });
});

describe('trajectory logs', () => {
  it('writes the reference logger schema, nests child runs and never writes the API key', async () => {
    const logDir = tempFolder('rlm-logs-');
    const { languageModel } = models((request) =>
      String(request.messages[1]?.content).includes('child run') ? repl('FINAL("child done")') : request.messages.length > 3 ? 'FINAL(all done)' : repl('const r = rlm_query("sub task sk-secret-key-123"); print(r)'),
    );
    const result = await new RLM({ model: 'root', languageModel, apiKey: 'sk-secret-key-123', maxDepth: 2, logDir }).completion({ context: 'c', query: 'q' });
    expect(result.logPath).toBeDefined();
    const text = readFileSync(result.logPath!, 'utf8');
    expect(text).not.toContain('sk-secret-key-123');
    const lines = text.trim().split('\n').map((line) => JSON.parse(line));
    expect(lines[0]).toMatchObject({ type: 'metadata', root_model: 'root', max_depth: 2, max_iterations: 30 });
    const iteration = lines[1];
    expect(Object.keys(iteration)).toEqual(expect.arrayContaining(['type', 'iteration', 'timestamp', 'prompt', 'response', 'code_blocks', 'final_answer', 'iteration_time']));
    expect(Object.keys(iteration.code_blocks[0].result)).toEqual(['stdout', 'stderr', 'locals', 'execution_time', 'rlm_calls', 'final_answer', 'tool_calls']);
    expect(iteration.code_blocks[0].result.stdout).toBe('child done\n');
    expect(iteration.code_blocks[0].result.locals).toEqual({ r: 'string (10 chars)' });
    const childCall = iteration.code_blocks[0].result.rlm_calls[0];
    expect(childCall.response).toBe('child done');
    expect(childCall.metadata.iterations[0].code_blocks[0].result.final_answer).toBe('child done');
    expect(lines[2]).toMatchObject({ type: 'iteration', iteration: 2, final_answer: 'all done' });
  });

  it('keeps every completed iteration on disk when the run fails, and ends the log saying how', async () => {
    const logDir = tempFolder('rlm-logs-');
    const { languageModel } = models([repl('print(1)'), repl('print(2)'), new Error('connection lost')]);
    expect(await rejectionOf(new RLM({ model: 'root', languageModel, logDir }).completion('c'), RunFailedError)).toMatchObject({ code: 'run_failed', message: expect.stringContaining('connection lost') });
    const [file] = readdirSync(logDir);
    const lines = readFileSync(join(logDir, file!), 'utf8').trim().split('\n').map((line) => JSON.parse(line));
    expect(lines.map((line) => line.type)).toEqual(['metadata', 'iteration', 'iteration', 'run_end']);
    expect(lines[3]).toMatchObject({ status: 'error', error: { message: 'connection lost' }, usage: { calls: 2 } });
  });
});

describe('setup code', () => {
  it('runs JavaScript, TypeScript and files before the first block', async () => {
    const folder = tempFolder('rlm-setup-');
    const file = join(folder, 'helpers.ts');
    writeFileSync(file, 'function shout(text: string): string { return text.toUpperCase() + "!" }\n');
    const { languageModel } = models([repl('FINAL([greeting, double(21), shout("hi")].join(" "))')]);
    const result = await new RLM({
      model: 'root',
      languageModel,
      setupCode: ['const greeting = "hello"', { code: 'const double = (n: number): number => n * 2', language: 'ts' }, { file }],
    }).completion('c');
    expect(result.response).toBe('hello 42 HI!');
  });

  it('fails the run with the setup error', async () => {
    const { languageModel } = models([repl('FINAL(1)')]);
    const failedSetup = await rejectionOf(new RLM({ model: 'root', languageModel, setupCode: 'throw new Error("bad setup")' }).completion('c'), RunFailedError);
    expect(failedSetup).toMatchObject({ code: 'sandbox_setup_failed', message: expect.stringMatching(/Setup code failed: Error: bad setup/) });
    const unreadable = thrownBy(() => new RLM({ model: 'root', languageModel, setupCode: { file: '/nonexistent/setup.js' } }), ConfigurationError);
    expect(unreadable).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/Cannot read setup code file \/nonexistent\/setup.js/) });
  });

  it('fails the run at its next model call once the setup error is known, though the replies carry no code yet', async () => {
    const { rootModel } = models(['Let me think about the context first.', 'Still thinking.', 'Almost there.', 'FINAL(1)']);
    // A model slower than the sandbox's start: the setup error is known before the second call.
    const languageModel = { chat: async (request: Parameters<typeof rootModel.chat>[0]) => (await new Promise((resolve) => setTimeout(resolve, 400)), rootModel.chat(request)) };
    const failedSetup = await rejectionOf(new RLM({ model: 'root', languageModel, setupCode: 'throw new Error("bad setup")' }).completion('c'), RunFailedError);
    expect(failedSetup).toMatchObject({ code: 'sandbox_setup_failed', message: expect.stringMatching(/Setup code failed: Error: bad setup/) });
    expect(rootModel.calls).toHaveLength(1);
  });
});

describe('sessions', () => {
  it('keep the sandbox across completions, with later contexts and earlier conversations as variables', async () => {
    const { rootModel, languageModel } = models([
      repl('const remembered = context.toUpperCase(); FINAL(remembered)'),
      repl('FINAL([remembered, context_0, context_1, typeof history_0, history_0.length > 2].join("|"))'),
    ]);
    const session = new RLM({ model: 'root', languageModel }).session();
    try {
      expect((await session.completion('first')).response).toBe('FIRST');
      expect((await session.completion('second')).response).toBe('FIRST|first|second|object|true');
      expect(String(rootModel.calls[1]!.messages[1]!.content)).toContain("this turn's input is `context_1`");
    } finally {
      await session.close();
    }
  });

  it('serve each completion\'s code with that completion\'s run: its children, its records', async () => {
    // The session's sandbox is started by the first completion; later completions' host calls must
    // still reach their own run, not the first one.
    const { languageModel } = models((request) => {
      const first = request.messages[1]!.content;
      if (typeof first === 'string' && first.includes('child run')) return repl('FINAL("child says " + context)');
      return request.messages.length < 4 && JSON.stringify(request.messages).includes('context_1') ? repl('FINAL(rlm_query("hi"))') : repl('FINAL("first")');
    });
    const session = new RLM({ model: 'root', languageModel, maxDepth: 2 }).session();
    try {
      await session.completion('first');
      const events: RlmEvent[] = [];
      for await (const event of session.stream({ context: 'second' })) events.push(event);
      const starts = events.filter((event) => event.type === 'run-start');
      expect(starts).toHaveLength(2);
      const [root, child] = starts;
      expect(child!.parentRunId).toBe(root!.runId);
      const result = events.find((event) => event.type === 'run-end');
      expect(result?.type === 'run-end' && result.result.response).toBe('child says hi');
      const block = result?.type === 'run-end' ? result.result.trajectory[0]!.codeBlocks[0]! : undefined;
      expect(block?.subcalls.map((call) => call.kind)).toEqual(['rlm']);
    } finally {
      await session.close();
    }
  });
});
