import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as publicApi from '../../src/index.js';
import { ConfigurationError, RLM, RlmError, setDefaultModelProvider, type ChatRequest, type LanguageModel } from '../../src/index.js';
import { BlockSyntaxError } from '../../src/sandbox/rewrite.js';
import { WorkerExitError } from '../../src/sandbox/worker-process.js';
import { ExpressionError } from '../../src/tools/builtin.js';
import { UsageError } from '../../src/cli/usage-error.js';
import { HostCallError, InstallationError } from '../../src/errors.js';
import { packageRoot } from '../../src/paths.js';
import { ScriptedModel } from '../../src/testing.js';
import { workerPids } from '../processes.js';
import { lastUserMessage, models } from './helpers.js';
import { repl } from '../repl.js';
import { thrownBy } from '../rejection.js';

describe('sessions stream and complete through one path', () => {
  it('gives a streamed turn the same history as a completed one', async () => {
    const { rootModel, languageModel } = models([repl('FINAL("one")'), repl('FINAL(typeof history_0 + ":" + history_0.length)')]);
    const session = new RLM({ model: 'root', languageModel }).session();
    try {
      for await (const event of session.stream('first')) if (event.type === 'error') throw new Error(event.error.message);
      let answer: string | undefined;
      for await (const event of session.stream('second')) if (event.type === 'run-end') answer = event.result.response;
      expect(answer).toMatch(/^object:\d+$/);
      expect(lastUserMessage(rootModel.calls[1]!)).not.toBe('');
      expect(String(rootModel.calls[1]!.messages[1]!.content)).toContain('earlier conversations are history_0 to history_0');
    } finally {
      await session.close();
    }
  });
});

describe('per-block records', () => {
  it('records a sub-call on the block that made it, even when it ends after that block', async () => {
    // Block 1's sub-call is in flight when its worker dies; the call is aborted and ends after
    // block 2 has started. It must still be recorded on block 1.
    const sub = new ScriptedModel(() => ({ content: 'late', delayMs: 5_000 }));
    const root = new ScriptedModel([repl('llm_query("slow")') + '\n' + repl('print("second block")'), repl('FINAL("done")')]);
    const languageModel: LanguageModel = { chat: (request: ChatRequest) => (request.model === 'root' ? root : sub).chat(request) };
    const rlm = new RLM({ model: 'root', subModel: 'sub', languageModel });
    let killed = false;
    const events: publicApi.RlmEvent[] = [];
    for await (const event of rlm.stream('c')) {
      events.push(event);
      if (event.type === 'llm-call-start' && event.purpose === 'sub' && !killed) {
        killed = true;
        for (const pid of workerPids()) process.kill(pid, 'SIGKILL');
      }
      if (event.type === 'run-end') {
        const [first, second] = event.result.trajectory[0]!.codeBlocks;
        expect(first!.result.reset).toBe(true);
        expect(first!.subcalls).toHaveLength(1);
        expect(first!.subcalls[0]).toMatchObject({ kind: 'llm', model: 'sub' });
        expect(first!.subcalls[0]!.error).toBeDefined();
        expect(second!.result.stdout).toBe('second block\n');
        expect(second!.subcalls).toHaveLength(0);
      }
    }
    expect(events.at(-1)?.type).toBe('run-end');
  });
});

describe('one error family', () => {
  it('makes every error rlm throws an RlmError with a stable code', () => {
    const errors: RlmError[] = [
      new publicApi.ConfigurationError('x'),
      new publicApi.SandboxError('sandbox_disposed', 'x'),
      new publicApi.ModelError('x', 500),
      new publicApi.ToolError('x'),
      new publicApi.ToolLoopError('x'),
      new publicApi.RunLimitError('max_time', 'x'),
      new WorkerExitError(1, null, ''),
      new BlockSyntaxError('x', 1, 1, ''),
      new ExpressionError('x'),
      new UsageError('x'),
      new HostCallError('RangeError', 'x'),
      new InstallationError('x'),
    ];
    for (const error of errors) {
      expect(error, error.name).toBeInstanceOf(RlmError);
      expect(error.code, error.name).toMatch(/^[a-z_]+$/);
    }
  });

  it('gives a limit error its partial answer and usage when it is built', async () => {
    const { languageModel } = models(() => ({ content: `Working. ${repl('print(1)')}`, usage: { inputTokens: 1_000, outputTokens: 0 } }));
    const error = await new RLM({ model: 'root', languageModel, maxTokens: 1_500 }).completion('c').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(publicApi.RunLimitError);
    const limit = error as publicApi.RunLimitError;
    expect(limit.partialAnswer).toContain('Working.');
    expect(limit.usage?.inputTokens).toBe(2_000);
  });
});

describe('options and models', () => {
  it('validates setupCode like every other option', () => {
    expect(thrownBy(() => new RLM({ model: 'root', languageModel: new ScriptedModel([]), setupCode: 42 as never }), ConfigurationError).code).toBe('configuration_error');
    expect(thrownBy(() => new RLM({ model: 'root', languageModel: new ScriptedModel([]), setupCode: [{ language: 'ts' }] as never }), ConfigurationError)).toMatchObject({ code: 'configuration_error', message: expect.stringMatching(/setupCode/) });
  });

  it('resolves each model name through a provider', async () => {
    const asked: string[] = [];
    const byName: Record<string, ScriptedModel> = { planner: new ScriptedModel([repl('FINAL(llm_query("q"))')]), reader: new ScriptedModel(['read']) };
    const provider = { getModel: (name: string) => (asked.push(name), byName[name]!) };
    const result = await new RLM({ model: 'planner', subModel: 'reader', provider }).completion('c');
    expect(result.response).toBe('read');
    expect(new Set(asked)).toEqual(new Set(['planner', 'reader']));
  });

  it('uses the default provider when no model, provider, URL or key is given', async () => {
    setDefaultModelProvider({ getModel: () => new ScriptedModel([repl('FINAL("from the default provider")')]) });
    try {
      expect((await new RLM({ model: 'anything' }).completion('c')).response).toBe('from the default provider');
    } finally {
      setDefaultModelProvider(undefined);
    }
  });
});

describe('the public API', () => {
  it('exports what a user needs and no internals', () => {
    const exported = Object.keys(publicApi).sort();
    for (const internal of ['ModelGateway', 'ModelScheduler', 'UsageTracker', 'ToolExecutor', 'ToolRegistry', 'toStrictSchema', 'loadSetupFiles', 'evaluateArithmetic', 'ScriptedModel']) {
      expect(exported, internal).not.toContain(internal);
    }
    for (const needed of ['RLM', 'RlmSession', 'RlmError', 'RunLimitError', 'defineTool', 'OpenAIModel', 'runToolLoop', 'Sandbox']) {
      expect(exported, needed).toContain(needed);
    }
  });

  it('leaves @internal members out of the published types', () => {
    const declarations = join(packageRoot(), 'dist', 'types', 'engine', 'rlm.d.ts');
    expect(existsSync(declarations)).toBe(true);
    const text = readFileSync(declarations, 'utf8');
    expect(text).toContain('completion<Output extends OutputSchemaSpec | undefined = undefined>(input: CompletionInput<Output>)');
    expect(text).not.toContain('startRun');
    expect(text).toContain('prepare(): Promise<PreparedRLM>');
    for (const internal of ['RunSettings', 'SessionState', 'TreeShared']) expect(text, internal).not.toContain(internal);
  });
});
