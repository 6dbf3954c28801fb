import { appendFileSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { batchWithTrajectories, loggedRun, resultLine, serveView } from '../view/helpers.js';
import { readResults } from '../../src/index.js';
import { rlmStrategyReply, startFakeOpenAIServer } from '../../src/testing.js';
import { mixedTasksFile } from '../batch/helpers.js';
import { tempFolder } from '../temp-folder.js';
import { runCli } from './helpers.js';

describe('rlm view on a batch results file', () => {
  let resultsPath: string;
  beforeAll(async () => {
    ({ resultsPath } = await batchWithTrajectories(tempFolder('rlm-view-batch-')));
  });

  const hrefOf = (page: string, id: string) => page.match(new RegExp(`<td class="id"><a href="([^"]+)">${id}</a>`))?.[1];

  it('writes the batch page and each trajectory page next to it, linked from the task rows', async () => {
    const result = await runCli(['view', resultsPath]);
    expect(result.code).toBe(0);
    const pagePath = resultsPath.replace(/\.jsonl$/, '.html');
    expect(result.stdout).toBe(`${pagePath}\n`);
    // The log that is gone is named; its row, like the one with no log, has no link.
    expect(result.stderr).toBe(`rlm: 1 trajectory log could not be read, so its task has no link: ${join(dirname(resultsPath), 'runs', 'gone.jsonl')} (ENOENT)\n`);
    const page = readFileSync(pagePath, 'utf8');
    expect(page).toContain('<h1>rlm batch <small>results.jsonl</small></h1>');
    expect(page).toMatch(/<tr data-status="completed"><td class="id">gamma<\/td>/);
    expect(page).toMatch(/<tr data-status="completed"><td class="id">epsilon<\/td>/);
    expect(page).toMatch(/<tr data-status="completed"><td class="id">delta<\/td>.*from a batch request/);
    const alpha = hrefOf(page, 'alpha')!;
    const beta = hrefOf(page, 'beta')!;
    expect(alpha).toMatch(/^results-trajectories\/rlm_[\w-]+\.html$/);
    // A log path relative to the results file is found there.
    expect(beta).toBe('results-trajectories/beta.html');
    expect(readFileSync(join(dirname(pagePath), alpha), 'utf8')).toContain('Alpha question?');
    expect(readFileSync(join(dirname(pagePath), beta), 'utf8')).toContain('Beta question?');
  });

  it('renders a log that several tasks name once, and links them all to it', async () => {
    const folder = tempFolder('rlm-view-batch-shared-');
    const log = (await loggedRun('Shared question?')).path;
    const shared = join(folder, 'shared.jsonl');
    writeFileSync(shared, resultLine({ id: 'one', log_path: log }) + resultLine({ id: 'two', log_path: log }));
    expect((await runCli(['view', shared])).code).toBe(0);
    const page = readFileSync(join(folder, 'shared.html'), 'utf8');
    expect(hrefOf(page, 'two')).toBe(hrefOf(page, 'one'));
    expect(readdirSync(join(folder, 'shared-trajectories'))).toHaveLength(1);
  });

  it('says once that the last line is cut off, and shows the rest', async () => {
    const folder = tempFolder('rlm-view-batch-torn-');
    const torn = join(folder, 'torn.jsonl');
    writeFileSync(torn, resultLine({ id: 'kept', answer: 'whole' }) + resultLine({ id: 'cut' }).slice(0, 30));
    const result = await runCli(['view', torn]);
    expect(result).toMatchObject({ code: 0, stderr: 'rlm: the last line of the results is cut off (the batch stopped while writing it, or is still writing): that line is left out.\n' });
    const page = readFileSync(join(folder, 'torn.html'), 'utf8');
    expect(page).toContain('<td class="id">kept</td>');
    expect(page).not.toContain('<td class="id">cut</td>');
    expect(page).toContain('id="torn-line"');
  });

  it('links from wherever --out puts the page', async () => {
    const out = join(tempFolder('rlm-view-batch-out-'), 'report.html');
    const result = await runCli(['view', resultsPath, '--out', out]);
    expect(result).toMatchObject({ code: 0, stdout: `${out}\n` });
    const beta = hrefOf(readFileSync(out, 'utf8'), 'beta')!;
    expect(beta).toBe('report-trajectories/beta.html');
    expect(existsSync(join(dirname(out), beta))).toBe(true);
  });

  it('serves the batch page and renders each trajectory on request, only for the tasks the results name', async () => {
    const { url, child, exited } = await serveView(resultsPath);
    try {
      const page = await (await fetch(url)).text();
      expect(hrefOf(page, 'alpha')).toBe('trajectory?id=alpha');
      expect(hrefOf(page, 'gamma')).toBeUndefined();
      const trajectory = await fetch(new URL('trajectory?id=beta', url));
      expect(trajectory.status).toBe(200);
      expect(await trajectory.text()).toContain('Beta question?');
      for (const missing of ['trajectory?id=gamma', 'trajectory?id=nobody', `trajectory?id=${encodeURIComponent('../results.jsonl')}`, 'trajectory']) {
        expect((await fetch(new URL(missing, url))).status).toBe(404);
      }
    } finally {
      child.kill('SIGINT');
    }
    expect(await exited).not.toBeNull();
  });
  it('follows a batch from its empty results file: the served page becomes the batch page once results arrive', async () => {
    const growing = join(tempFolder('rlm-view-batch-follow-'), 'results.jsonl');
    writeFileSync(growing, '');
    const { url, child } = await serveView(growing, ['--follow']);
    try {
      expect(await (await fetch(url)).text()).toContain('<h1>rlm run');
      const before = await (await fetch(`${url}version`)).text();
      appendFileSync(growing, resultLine({ id: 'first', answer: 'first answer' }));
      expect(await (await fetch(`${url}version`)).text()).not.toBe(before);
      const page = await (await fetch(url)).text();
      expect(page).toContain('<h1>rlm batch');
      expect(page).toContain('first answer');
      expect(page).toContain("fetch('/version')");
    } finally {
      child.kill('SIGINT');
    }
  });
});

describe('rlm view on what rlm batch wrote', () => {
  it('shows each task with its trajectory link and the tokens per model of the results file, in both line shapes', async () => {
    const folder = tempFolder('rlm-view-real-batch-');
    const server = await startFakeOpenAIServer({ reply: rlmStrategyReply });
    try {
      const { path } = mixedTasksFile(folder, 4);
      const out = join(folder, 'results.jsonl');
      const batch = await runCli(['batch', path, '--out', out, '--base-url', server.baseURL, '--model', 'fake-rlm', '--log-dir', join(folder, 'logs'), '--quiet']);
      expect(batch.code).toBe(0);
      const records = readResults(out);
      const view = await runCli(['view', out]);
      expect(view).toMatchObject({ code: 0, stderr: '' });
      const page = readFileSync(out.replace(/\.jsonl$/, '.html'), 'utf8');
      // t3 is an OpenAI Batch line: its record rides along in the line, log path included.
      for (const id of ['t0', 't1', 't2', 't3']) expect(page).toMatch(new RegExp(`<td class="id"><a href="results-trajectories/[^"]+\\.html">${id}</a>`));
      const calls = [...records.values()].reduce((total, record) => total + record.usage.by_model['fake-rlm']!.calls, 0);
      const inputTokens = [...records.values()].reduce((total, record) => total + record.usage.by_model['fake-rlm']!.input_tokens, 0);
      expect(calls).toBeGreaterThan(4);
      expect(page).toContain(`<tr><td>fake-rlm</td><td>${calls}</td><td>${inputTokens.toLocaleString('en-US')}</td>`);
    } finally {
      await server.close();
    }
  });
});
