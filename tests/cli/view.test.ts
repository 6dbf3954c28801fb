import { appendFileSync, chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { iterationLine, loggedRun, serveView } from '../view/helpers.js';
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

  it('serves the page on loopback with --serve, re-reading the log, and tells a following page when it changed', async () => {
    const logPath = scratchFile('growing.jsonl', iterationLine(1, 'first reply'));
    const { url, child, exited } = await serveView(logPath, ['--follow']);
    try {
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
      const first = await (await fetch(url)).text();
      expect(first).toContain('first reply');
      expect(first).toContain("fetch('/version')");
      const before = await (await fetch(`${url}version`)).text();
      appendFileSync(logPath, iterationLine(2, 'second reply'));
      expect(await (await fetch(`${url}version`)).text()).not.toBe(before);
      expect(await (await fetch(url)).text()).toContain('second reply');
      expect((await fetch(`${url}other`)).status).toBe(404);
    } finally {
      child.kill('SIGINT');
    }
    expect(await exited).not.toBeNull();
  });

  it.runIf(process.platform === 'linux')('opens the page with the system opener with --open, and says so when there is none', async () => {
    const { path } = await loggedRun();
    const bin = join(scratch, 'opener-bin');
    mkdirSync(bin, { recursive: true });
    const opened = join(scratch, 'opened.txt');
    writeFileSync(join(bin, 'xdg-open'), `#!/bin/sh\necho "$1" > ${opened}\n`);
    chmodSync(join(bin, 'xdg-open'), 0o755);
    const result = await runCli(['view', path, '--open'], { env: { PATH: `${bin}:${process.env.PATH}` } });
    expect(result.code).toBe(0);
    const page = result.stdout.trim();
    await expect.poll(() => (existsSync(opened) ? readFileSync(opened, 'utf8').trim() : '')).toBe(page);
    const without = await runCli(['view', path, '--open'], { env: { PATH: '/nonexistent' } });
    expect(without.stderr).toContain('no browser could be opened (xdg-open is missing)');
  });

  it('refuses --follow without --serve', async () => {
    const { path } = await loggedRun();
    const result = await runCli(['view', path, '--follow']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--follow updates a served page: use it with --serve.');
  });
});
