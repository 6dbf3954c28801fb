import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { calculatorTool, defineTool, RLM, type RlmEvent } from '../../src/index.js';
import { packageRoot } from '../../src/paths.js';
import { models } from './helpers.js';
import { repl } from '../repl.js';
import { tempFolder } from '../temp-folder.js';

const stats = defineTool({
  name: 'get_stats',
  description: 'Statistics for a question',
  parameters: z.object({ question_id: z.string() }),
  execute: ({ question_id }) => (question_id === 'q1' ? { avg: 4.2 } : Promise.reject(new Error(`unknown question ${question_id}`))),
});

describe('host tools in the sandbox', () => {
  it('are callable as tools.NAME, tool_handler and through llm_query with TOOLS, with events and log entries', async () => {
    const code = [
      'const direct = tools.get_stats({ question_id: "q1" });',
      'const text = tool_handler("get_stats", { question_id: "q1" });',
      'let failure; try { tools.get_stats({ question_id: "zz" }) } catch (e) { failure = e.message }',
      'const viaModel = llm_query("What is the average for q1?", { tools: TOOLS, tool_handler });',
      'print(JSON.stringify({ direct, text, failure, viaModel, names: TOOLS.map((t) => t.function.name) }))',
    ].join('\n');
    const { rootModel, subModel, languageModel } = models([repl(code), 'FINAL(done)'], [{ toolCalls: [{ name: 'get_stats', arguments: { question_id: 'q1' } }] }, 'q1 averages 4.2']);
    const logDir = tempFolder('rlm-tool-logs-');
    const rlm = new RLM({ model: 'root', subModel: 'sub', languageModel, tools: [stats, calculatorTool], logDir });
    const events: RlmEvent[] = [];
    let logPath = '';
    for await (const event of rlm.stream('c')) {
      events.push(event);
      if (event.type === 'run-end') logPath = event.result.logPath!;
    }
    const output = JSON.parse(String(rootModel.calls[1]!.messages.at(-1)!.content).split('REPL output:\n')[1]!.split('\n')[0]!);
    expect(output).toEqual({
      direct: { avg: 4.2 },
      text: '{"avg":4.2}',
      failure: 'unknown question zz',
      viaModel: 'q1 averages 4.2',
      names: ['get_stats', 'calculator'],
    });
    // The sub-model received the tool schemas and the tool's result.
    expect(subModel.calls[0]!.tools?.map((tool) => tool.function.name)).toEqual(['get_stats', 'calculator']);
    expect(subModel.calls[1]!.messages.at(-1)).toMatchObject({ role: 'tool', content: '{"avg":4.2}' });

    const toolEvents = events.filter((event) => event.type === 'tool-call-start' || event.type === 'tool-call-end');
    expect(toolEvents.map((event) => event.type)).toEqual(Array(4).fill(['tool-call-start', 'tool-call-end']).flat());
    expect(toolEvents[1]).toMatchObject({ toolName: 'get_stats', result: '{"avg":4.2}' });
    expect(toolEvents[5]).toMatchObject({ toolName: 'get_stats', error: 'unknown question zz' });
    expect((toolEvents[0] as { arguments: unknown }).arguments).toEqual({ question_id: 'q1' });

    const iteration = JSON.parse(readFileSync(logPath, 'utf8').trim().split('\n')[1]!);
    expect(iteration.code_blocks[0].result.tool_calls.map((call: { success: boolean }) => call.success)).toEqual([true, true, false, true]);
  });

  it('cannot be broken by model code: TOOLS and tools are frozen', async () => {
    const { rootModel, languageModel } = models([
      repl('try { TOOLS[0].function.name = "hijacked" } catch {} try { tools.get_stats = () => "fake" } catch {} TOOLS.length'),
      repl('print(TOOLS[0].function.name, JSON.stringify(tools.get_stats({ question_id: "q1" })))'),
      'FINAL(ok)',
    ]);
    await new RLM({ model: 'root', languageModel, tools: [stats] }).completion('c');
    expect(JSON.stringify(rootModel.calls[2]!.messages)).toContain('get_stats {\\"avg\\":4.2}');
  });

  it('are listed in the system prompt with descriptions and parameters', async () => {
    const { rootModel, languageModel } = models([repl('FINAL(1)')]);
    await new RLM({ model: 'root', languageModel, tools: [stats] }).completion('c');
    const system = String(rootModel.calls[0]!.messages[0]!.content);
    expect(system).toContain('`tools.get_stats(args)`: Statistics for a question');
    expect(system).toContain('"question_id":{"type":"string"}');
    expect(system).toContain('tool_handler');
  });

  it('say so when a run has no tools', async () => {
    const { rootModel, languageModel } = models([repl('try { tool_handler("x", {}) } catch (e) { print(e.message) }'), 'FINAL(ok)']);
    await new RLM({ model: 'root', languageModel }).completion('c');
    expect(JSON.stringify(rootModel.calls[1]!.messages)).toContain('tool_handler: no tools are available in this run');
  });

  it('come from setup files, whose sandboxSetup runs before the first block', async () => {
    const { rootModel, languageModel } = models([repl('print(JSON.stringify([tools.word_count({ text: "one two three" }), STOP_WORDS.length]))'), 'FINAL(ok)']);
    await new RLM({ model: 'root', languageModel, setup: [join(packageRoot(), 'examples', 'plain-tool.js')] }).completion('c');
    expect(JSON.stringify(rootModel.calls[1]!.messages)).toContain('[{\\"words\\":3},4]');
  });
});
