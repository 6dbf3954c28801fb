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
import { iterationLine, loggedRun, serveView, structuredRun } from './helpers.js';

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
});
