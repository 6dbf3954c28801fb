import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOpenAIServer, type FakeOpenAIServer, type FakeRequest } from '../../src/testing.js';
import { runCli, scratchFile } from './helpers.js';
import { repl } from '../repl.js';

let server: FakeOpenAIServer;
const texts = (request: FakeRequest) => (request.body.messages as { content?: unknown }[]).map((message) => String(message.content));

beforeAll(async () => {
  // A root model that prints about 2,000 characters a turn until compacted, then answers from a variable.
  server = await startFakeOpenAIServer({
    reply: (request) => {
      const all = texts(request);
      if (all.at(-1)!.includes('about to be replaced by a summary')) return 'Summary: found is 42, in the variable found.';
      if (all.some((text) => text.includes('was replaced by your summary'))) return repl('FINAL(`found=${found}`)');
      return repl(all.some((text) => text.startsWith('Code executed')) ? 'print("b".repeat(2000))' : 'const found = 42; print("a".repeat(2000))');
    },
  });
});
afterAll(() => server.close());

const run = (...flags: string[]) => runCli(['run', '--base-url', server.baseURL, '--model', 'root', '--context', scratchFile('compaction.txt', 'x'), '--max-iterations', '20', '--context-window', '6000', ...flags, 'q']);

describe('compaction from the command line', () => {
  it('compacts at --compact-at, reports it in the progress lines, and answers', async () => {
    const result = await run('--compact-at', '80');
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('found=42\n');
    expect(result.stderr).toMatch(/conversation compacted to fit 6,000 tokens: ~[\d,]+ -> ~[\d,]+ tokens/);
  });

  it('ends with context_window under --no-compaction, and refuses contradicting flags', async () => {
    const off = await run('--no-compaction', '--json');
    expect(off.code).toBe(1);
    expect(JSON.parse(off.stdout)).toMatchObject({ error: { code: 'context_window' } });
    const both = await run('--no-compaction', '--compact-at', '50');
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('--compact-at and --no-compaction contradict each other');
    const bad = await run('--compact-at', '120');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('expected a percentage greater than 0 and at most 100');
  });
});
