// The page in a real browser: Debian's chromium driven by playwright-core. Set CHROMIUM_PATH to use
// another build; without one the test is skipped and says so (.ci/run installs chromium).
import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/paths.js';
import { readRunLog } from '../../src/view/log-reader.js';
import { renderPage } from '../../src/view/render-page.js';
import { runCli } from '../cli/helpers.js';
import { tempFolder } from '../temp-folder.js';
import { batchWithTrajectories, iterationLine, loggedRun, serveView, structuredRun } from './helpers.js';

const browserPath = process.env.CHROMIUM_PATH ?? findOnPath(['chromium', 'chromium-browser', 'google-chrome']);
const artifacts = join(packageRoot(), 'test-artifacts');

function findOnPath(names: string[]): string | undefined {
  for (const name of names) {
    try {
      return execFileSync('which', [name], { encoding: 'utf8' }).trim() || undefined;
    } catch {
      // not installed under this name
    }
  }
  return undefined;
}

if (!browserPath) console.warn('Skipping the viewer browser test: no Chromium found (install chromium or set CHROMIUM_PATH).');

describe.skipIf(!browserPath)('the viewer page in Chromium', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: browserPath!, args: ['--no-sandbox'] });
  });
  afterAll(async () => {
    await browser?.close();
  });

  it('shows the answer and stats, expands the tree, searches and navigates, fetching nothing', async () => {
    const { path } = await loggedRun('What is counted?');
    mkdirSync(artifacts, { recursive: true });
    const pagePath = join(artifacts, 'viewer.html');
    writeFileSync(pagePath, renderPage(readRunLog(readFileSync(path, 'utf8')), 'run.jsonl'));

    const page = await browser.newPage({ colorScheme: 'dark' });
    const requested: string[] = [];
    page.on('request', (request) => requested.push(request.url()));
    const scriptErrors: string[] = [];
    page.on('pageerror', (error) => scriptErrors.push(error.message));
    await page.goto(pathToFileURL(pagePath).href);

    await expect(page.locator('#answer pre').innerText()).resolves.toBe('all done');
    await expect(page.locator('#stat-children .value').innerText()).resolves.toBe('1');
    await expect(page.locator('#stat-tools .value').innerText()).resolves.toBe('1');
    // Dark theme follows the system.
    const background = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    expect(background).toBe('rgb(22, 24, 28)');

    // The child run is collapsed until its summary is clicked.
    const child = page.locator('details.child-run').first();
    const childCode = child.locator('pre.code').first();
    await expect(childCode.isVisible()).resolves.toBe(false);
    await child.locator('> summary').click();
    await expect(childCode.innerText()).resolves.toBe('FINAL("seven")');

    // Search marks every match and opens what holds it.
    await child.locator('> summary').click();
    await page.keyboard.press('/');
    await page.keyboard.type('a summary');
    await page.waitForFunction(() => document.getElementById('matches')!.textContent !== '');
    const matches = await page.locator('#matches').innerText();
    expect(Number.parseInt(matches, 10)).toBeGreaterThan(0);
    await expect(page.locator('mark').first().isVisible()).resolves.toBe(true);

    // j / k move between iterations.
    await page.keyboard.press('Escape');
    await page.keyboard.press('j');
    await page.keyboard.press('j');
    await expect(page.locator('details.root-iteration.current summary').first().innerText()).resolves.toMatch(/^Iteration 2/);
    await page.keyboard.press('k');
    await expect(page.locator('details.root-iteration.current summary').first().innerText()).resolves.toMatch(/^Iteration 1/);

    await page.screenshot({ path: join(artifacts, 'viewer.png'), fullPage: true });
    expect(scriptErrors).toEqual([]);
    expect(requested.filter((url) => !url.startsWith('file://'))).toEqual([]);
  });

  it('shows a refused FINAL with a visible badge and its problems, found by search', async () => {
    const { path } = await structuredRun();
    mkdirSync(artifacts, { recursive: true });
    const pagePath = join(artifacts, 'viewer-structured.html');
    writeFileSync(pagePath, renderPage(readRunLog(readFileSync(path, 'utf8')), 'run.jsonl'));
    const page = await browser.newPage();
    await page.goto(pathToFileURL(pagePath).href);
    const badge = page.locator('details.root-iteration').first().locator('> summary .rejected-badge');
    await expect(badge.isVisible()).resolves.toBe(true);
    await expect(badge.innerText()).resolves.toBe('FINAL rejected');
    // The schema starts collapsed; the answer is shown indented.
    await expect(page.locator('#output-schema pre').isVisible()).resolves.toBe(false);
    await expect(page.locator('#answer pre').innerText()).resolves.toContain('\n  "parties": [\n');
    // Search finds the problems inside a closed iteration and opens it.
    await page.locator('details.root-iteration').first().locator('> summary').click();
    await page.keyboard.press('/');
    await page.keyboard.type('expected array, received string');
    await page.waitForFunction(() => document.getElementById('matches')!.textContent !== '');
    await expect(page.locator('.rejected-problems mark').first().isVisible()).resolves.toBe(true);
    await page.screenshot({ path: join(artifacts, 'viewer-structured.png'), fullPage: true });
  });

  it('updates a page served with --follow while the run is still writing its log', async () => {
    mkdirSync(artifacts, { recursive: true });
    const logPath = join(artifacts, 'following.jsonl');
    writeFileSync(logPath, iterationLine(1, 'first reply'));
    const { url, child } = await serveView(logPath, ['--follow']);
    try {
      const page = await browser.newPage();
      await page.goto(url);
      await expect(page.locator('#status').innerText()).resolves.toBe('unfinished');
      await expect(page.locator('#ends-early').isVisible()).resolves.toBe(true);
      appendFileSync(logPath, iterationLine(2, 'second reply'));
      await page.getByText('second reply').waitFor({ timeout: 10_000 });
      appendFileSync(logPath, `${JSON.stringify({ type: 'run_end', status: 'completed', answer: 'all there' })}\n`);
      await page.locator('#status', { hasText: 'completed' }).waitFor({ timeout: 10_000 });
      await expect(page.locator('#answer pre').innerText()).resolves.toBe('all there');
    } finally {
      child.kill('SIGINT');
    }
  });
  it('sorts and filters the batch table, and opens a task\'s trajectory from its row, written and served', async () => {
    const folder = tempFolder('rlm-view-batch-browser-');
    const { resultsPath } = await batchWithTrajectories(folder);
    const written = await runCli(['view', resultsPath, '--out', join(artifacts, 'batch.html')]);
    expect(written.code).toBe(0);
    const page = await browser.newPage();
    const requested: string[] = [];
    page.on('request', (request) => requested.push(request.url()));
    const scriptErrors: string[] = [];
    page.on('pageerror', (error) => scriptErrors.push(error.message));
    await page.goto(pathToFileURL(written.stdout.trim()).href);
    const ids = () => page.locator('#tasks tbody tr:not([hidden]) td.id').allInnerTexts();
    await expect(ids()).resolves.toEqual(['alpha', 'beta', 'gamma', 'delta', 'epsilon']);

    // Sorting by cost: ascending, then descending on a second click.
    const cost = page.locator('#tasks th', { hasText: 'cost' }).locator('button');
    await cost.click();
    await expect(ids()).resolves.toEqual(['gamma', 'delta', 'alpha', 'epsilon', 'beta']);
    await cost.click();
    await expect(ids()).resolves.toEqual(['beta', 'epsilon', 'alpha', 'delta', 'gamma']);
    await expect(page.locator('#tasks th', { hasText: 'cost' }).getAttribute('aria-sort')).resolves.toBe('descending');
    // Tasks without a score sort last either way.
    await page.locator('#tasks th', { hasText: 'score' }).locator('button').click();
    await expect(ids()).resolves.toEqual(['gamma', 'alpha', 'beta', 'epsilon', 'delta']);

    // Filtering by text (in the answers too) and by status, together.
    await page.keyboard.press('/');
    await page.keyboard.type('BATCH REQ');
    await expect(ids()).resolves.toEqual(['delta']);
    await expect(page.locator('#shown').innerText()).resolves.toBe('1 of 5 tasks');
    await page.locator('#filter').fill('');
    await page.locator('#status-filter').selectOption('failed');
    await expect(ids()).resolves.toEqual(['beta']);
    await page.locator('#filter').fill('gamma');
    await expect(ids()).resolves.toEqual([]);
    await page.locator('#status-filter').selectOption('');
    await expect(ids()).resolves.toEqual(['gamma']);
    await page.screenshot({ path: join(artifacts, 'batch.png'), fullPage: true });

    // A row's link opens the task's trajectory page.
    await page.locator('#filter').fill('');
    await page.locator('#tasks a', { hasText: 'alpha' }).click();
    await page.waitForURL(/batch-trajectories\/rlm_[\w-]+\.html$/);
    await expect(page.locator('#answer pre').innerText()).resolves.toBe('all done');
    await expect(page.locator('.question pre').innerText()).resolves.toBe('Alpha question?');
    expect(scriptErrors).toEqual([]);
    expect(requested.filter((url) => !url.startsWith('file://'))).toEqual([]);

    // Served, the same link renders the trajectory on request.
    const { url, child } = await serveView(resultsPath);
    try {
      await page.goto(url);
      await page.locator('#tasks a', { hasText: 'beta' }).click();
      await page.waitForURL(/\/trajectory\?id=beta$/);
      await expect(page.locator('.question pre').innerText()).resolves.toBe('Beta question?');
    } finally {
      child.kill('SIGINT');
    }
  });
});
