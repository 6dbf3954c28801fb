import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { defineTool, RLM } from '../../src/index.js';
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
