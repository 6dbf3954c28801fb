import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { defineTool, RLM } from '../../src/index.js';
import { models, repl } from '../engine/helpers.js';

const lookup = defineTool({
  name: 'lookup',
  description: 'Looks a key up',
  parameters: z.object({ key: z.string() }),
  execute: ({ key }) => ({ value: key.length }),
});

/** A real run's log: a child RLM, a sub-model call and a tool call in one block, then FINAL. */
export async function loggedRun(query = 'q'): Promise<{ path: string; text: string }> {
  const logDir = mkdtempSync(join(tmpdir(), 'rlm-view-'));
  const code = 'const child = rlm_query("child run: count"); const sub = llm_query("summarise"); const found = tools.lookup({ key: "abc" }); print(child, sub, found.value)';
  const { languageModel } = models(
    (request) => (String(request.messages[1]?.content).includes('child run') ? repl('FINAL("seven")') : request.messages.length > 3 ? 'FINAL(all done)' : repl(code)),
    ['a summary'],
  );
  const result = await new RLM({ model: 'root', subModel: 'sub', languageModel, tools: [lookup], maxDepth: 2, logDir }).completion({ context: 'c', query });
  return { path: result.logPath!, text: readFileSync(result.logPath!, 'utf8') };
}
