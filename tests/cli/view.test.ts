import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loggedRun } from '../view/helpers.js';
import { runCli, scratch, scratchFile } from './helpers.js';

describe('rlm view', () => {
  it('writes the page next to the log and prints its path, or where --out says', async () => {
    const { path } = await loggedRun('What is counted?');
    const result = await runCli(['view', path]);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    const page = path.replace(/\.jsonl$/, '.html');
    expect(result.stdout).toBe(`${page}\n`);
    expect(readFileSync(page, 'utf8')).toContain('What is counted?');
    const out = join(scratch, 'chosen.html');
    expect((await runCli(['view', path, '--out', out])).stdout).toBe(`${out}\n`);
    expect(readFileSync(out, 'utf8')).toContain('all done');
  });

  it('opens a cut-off log, saying it ends early', async () => {
    const { text } = await loggedRun();
    const cut = scratchFile('cut.jsonl', text.slice(0, text.lastIndexOf('{"type":"iteration"') + 30));
    const result = await runCli(['view', cut]);
    expect(result.code).toBe(0);
    expect(result.stderr).toContain('the log ends early');
    expect(readFileSync(cut.replace(/\.jsonl$/, '.html'), 'utf8')).toContain('id="ends-early"');
  });

  it('fails with what to do for a missing file or one that holds no run', async () => {
    const missing = await runCli(['view', join(scratch, 'nope.jsonl')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/Cannot read the log .*nope\.jsonl: ENOENT\. Pass a \.jsonl file written with --log-dir/);
    const notALog = scratchFile('notes.jsonl', 'hello\n');
    writeFileSync(notALog, 'hello\nworld\n');
    const empty = await runCli(['view', notALog]);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain('holds no run');
    expect(existsSync(notALog.replace(/\.jsonl$/, '.html'))).toBe(false);
  });
});
