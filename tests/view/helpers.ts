import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { defineTool, RLM, type TaskUsage } from '../../src/index.js';
import { BIN } from '../cli/helpers.js';
import { models } from '../engine/helpers.js';
import { repl } from '../repl.js';
import { tempFolder } from '../temp-folder.js';

const lookup = defineTool({
  name: 'lookup',
  description: 'Looks a key up',
  parameters: z.object({ key: z.string() }),
  execute: ({ key }) => ({ value: key.length }),
});

/** A real run's log: a child RLM, a sub-model call and a tool call in one block, then FINAL. */
export async function loggedRun(query = 'q'): Promise<{ path: string; text: string }> {
  const logDir = tempFolder('rlm-view-');
  const code = 'const child = rlm_query("child run: count"); const sub = llm_query("summarise"); const found = tools.lookup({ key: "abc" }); print(child, sub, found.value)';
  const { languageModel } = models(
    (request) => (String(request.messages[1]?.content).includes('child run') ? repl('FINAL("seven")') : request.messages.length > 3 ? 'FINAL(all done)' : repl(code)),
    ['a summary'],
  );
  const result = await new RLM({ model: 'root', subModel: 'sub', languageModel, tools: [lookup], maxDepth: 2, logDir }).completion({ context: 'c', query });
  return { path: result.logPath!, text: readFileSync(result.logPath!, 'utf8') };
}

/** Starts `rlm view --serve` on `logPath` and resolves with the URL it prints, and the process. */
export async function serveView(logPath: string, extra: string[] = []): Promise<{ url: string; child: ChildProcess; exited: Promise<number | null> }> {
  const child = spawn(process.execPath, [BIN, 'view', logPath, '--serve', ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    let stdout = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (stdout.includes('\n')) resolve(stdout.trim());
    });
    void exited.then((code) => reject(new Error(`rlm view exited with ${code}: ${stderr}`)));
  });
  return { url, child, exited };
}

/** One more iteration line, as a run still writing its log appends it. */
export const iterationLine = (index: number, response: string) =>
  `${JSON.stringify({ type: 'iteration', iteration: index, prompt: [], response, code_blocks: [], final_answer: null, iteration_time: 0.1 })}\n`;

export const contractAnswer = { parties: [{ name: 'Acme', signed: '2024-01-02' }], effective: '2024-02-01' };

/**
 * A real log of a run given an output schema: a FINAL value in a block is rejected (a wrong type and
 * a missing field), then a text FINAL that is not JSON, then a matching answer is taken.
 */
export async function structuredRun(): Promise<{ path: string; text: string }> {
  const logDir = tempFolder('rlm-view-structured-');
  const output = z.object({ parties: z.array(z.object({ name: z.string(), signed: z.string() })), effective: z.string() });
  const { languageModel } = models([repl('FINAL({ parties: "none" })'), 'FINAL({parties: [], effective: "x"})', repl(`FINAL(${JSON.stringify(contractAnswer)})`)]);
  const result = await new RLM({ model: 'root', languageModel, logDir }).completion({ context: 'a contract', query: 'Who signed?', output });
  return { path: result.logPath!, text: readFileSync(result.logPath!, 'utf8') };
}

/** The record of a completed one-iteration task, as `rlm batch` writes it; `fields` change it (undefined drops a field). */
function taskRecord(fields: Record<string, unknown>): Record<string, unknown> {
  const usage = taskUsage({ root: { calls: 1, input_tokens: 50, output_tokens: 5, cost_usd: 0.001 } });
  return { status: 'completed', answer: 'ok', usage, cost_usd: 0.001, iterations: 1, forced: false, duration_ms: 100, attempts: 1, ...fields };
}

/** One line of a batch results file in rlm's shape. */
export function resultLine(fields: Record<string, unknown>): string {
  return `${JSON.stringify(taskRecord(fields))}\n`;
}

/** A task's `usage` as `rlm batch` writes it: the totals of its models. */
export function taskUsage(byModel: TaskUsage['by_model']): TaskUsage {
  const models = Object.values(byModel);
  const sum = (field: 'calls' | 'input_tokens' | 'output_tokens') => models.reduce((total, model) => total + model[field], 0);
  return { calls: sum('calls'), input_tokens: sum('input_tokens'), output_tokens: sum('output_tokens'), by_model: byModel };
}

/**
 * One line in the OpenAI Batch output shape, for a completed request. With `record` it is what
 * `rlm batch` writes (the task's record rides along as `rlm`); without, what OpenAI's own batches
 * write: the response alone.
 */
export function openAiResultLine(options: { id: string; answer?: string; forced?: boolean; record?: Record<string, unknown> }): string {
  const answer = options.answer ?? 'ok';
  const body = {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1,
    model: 'rlm-model',
    choices: [{ index: 0, message: { role: 'assistant', content: answer, refusal: null }, finish_reason: options.forced ? 'length' : 'stop', logprobs: null }],
    usage: { prompt_tokens: 120, completion_tokens: 8, total_tokens: 128 },
  };
  const rlm = options.record && { rlm: taskRecord({ answer, forced: options.forced ?? false, ...options.record }) };
  return `${JSON.stringify({ id: `batch_req_${options.id}`, custom_id: options.id, response: { status_code: 200, request_id: `req_${options.id}`, body }, error: null, ...rlm })}\n`;
}

/**
 * A results file whose tasks point at real trajectories: `alpha` at an absolute log path, `beta`
 * (failed) at a path relative to the results file, `gamma` at none, `delta` in the OpenAI Batch
 * shape, `epsilon` at a log that is gone.
 */
export async function batchWithTrajectories(folder: string): Promise<{ resultsPath: string; alphaLog: string; betaLog: string }> {
  const alphaLog = (await loggedRun('Alpha question?')).path;
  const betaText = (await loggedRun('Beta question?')).text;
  mkdirSync(join(folder, 'runs'), { recursive: true });
  const betaLog = join(folder, 'runs', 'beta.jsonl');
  writeFileSync(betaLog, betaText);
  const resultsPath = join(folder, 'results.jsonl');
  writeFileSync(
    resultsPath,
    [
      resultLine({ id: 'alpha', answer: 'all done', score: 1, cost_usd: 0.03, duration_ms: 3000, iterations: 2, log_path: alphaLog }),
      resultLine({ id: 'beta', status: 'failed', answer: undefined, partial_answer: 'half', error: { code: 'max_budget', message: 'The budget is spent.' }, cost_usd: 0.05, duration_ms: 1000, iterations: 5, log_path: 'runs/beta.jsonl' }),
      resultLine({ id: 'gamma', answer: 'no log here', score: 0, cost_usd: 0.01, duration_ms: 2000, iterations: 1 }),
      openAiResultLine({ id: 'delta', answer: 'from a batch request', record: { cost_usd: 0.02, iterations: 3 } }),
      resultLine({ id: 'epsilon', answer: 'log gone', cost_usd: 0.04, duration_ms: 500, log_path: join(folder, 'runs', 'gone.jsonl') }),
    ].join(''),
  );
  return { resultsPath, alphaLog, betaLog };
}
