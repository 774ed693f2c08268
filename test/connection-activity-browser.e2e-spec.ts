import { mkdirSync } from 'node:fs';
import * as path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import request from 'supertest';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';
import { launchChromium, watchViolations } from './support/browser';
import { connectTenant, control, createTenant, op } from './support/connect';
import { reward, send, waitFor } from './support/send';

const ARTIFACTS = path.join(__dirname, 'artifacts');

/** What the page's script sees (typed here: the test compiles without the DOM library). */
interface Box {
  left: number;
  right: number;
  top: number;
  width: number;
  height: number;
}
interface Doc {
  documentElement: { scrollWidth: number; clientWidth: number };
  querySelector(selector: string): {
    scrollWidth: number;
    clientWidth: number;
    getBoundingClientRect(): Box;
  } | null;
}

/**
 * A connection's activity page on the ops dashboard (`/ops/connections/{id}`), in headless Chromium at 1280 and 390 px:
 * reached from the connection's row, the last hour's requests, error rate, 429s and p50 / p95 latency, and the latest
 * requests, each part visible and every link within the screen; no CSP violation.
 */
describe('the connection activity page in a real browser (headless Chromium)', () => {
  let t: TestApp;
  let browser: Browser;
  let connectionId: string;
  const PARTS = ['#connection', '#calls-summary', '#latest-calls'];

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    t = await startTestApp({
      LOG_LEVEL: 'silent',
      OPS_PROBE_INTERVAL_MS: '0',
      REWARDS_SANDBOX_RATE_LIMIT_RPS: '50',
    });
    await control(t, '/reset');
    await createTenant(t, 'acme');
    connectionId = await connectTenant(t, 'acme');
    await control(t, '/faults', { route: 'orders', status: 429, retry_after: 0, times: 1 });
    await send(t, 'acme', 'page-1', { rewards: [reward(), reward()] }).expect(201);
    await send(t, 'acme', 'page-2', { rewards: [reward({ products: ['PRODUNKNOWN'] })] }).expect(422);
    // Connect's webhook registration, 1 throttled + 2 orders, 1 rejected order.
    await waitFor(
      async () =>
        (await request(t.baseUrl).get('/v1/tenants/acme/connection/activity').set(op).expect(200)).body
          .activity as unknown[],
      (rows) => rows.length >= 5,
    );
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  const context = (options: Parameters<Browser['newContext']>[0]): Promise<BrowserContext> =>
    browser.newContext({
      httpCredentials: { username: 'ops', password: t.config.operatorApiKey },
      timezoneId: 'Europe/Berlin',
      locale: 'en-GB',
      ...options,
    });

  /** Every part's box, the page's width, the calls table's own scroll width, and every link's box. */
  const layout = (page: Page) =>
    page.evaluate((parts) => {
      const d = (globalThis as unknown as { document: Doc }).document;
      const table = d.querySelector('#calls-table');
      if (!table) throw new Error('no calls table');
      return {
        page: d.documentElement.scrollWidth,
        viewport: d.documentElement.clientWidth,
        table: { scroll: table.scrollWidth, width: table.clientWidth },
        parts: parts.map((p) => {
          const el = d.querySelector(p);
          return el ? el.getBoundingClientRect() : null;
        }),
      };
    }, PARTS);

  it('at 1280 px: reached from the connection row, shows the last hour and the latest requests', async () => {
    const ctx = await context({ viewport: { width: 1280, height: 900 } });
    const page = await ctx.newPage();
    const violations = watchViolations(page);
    await page.goto(`${t.baseUrl}/ops`);
    await page.click(`tr[data-connection="${connectionId}"] a[data-action="activity"]`);
    await page.waitForURL(`${t.baseUrl}/ops/connections/${connectionId}`);

    const stat = (key: string) => page.locator(`[data-stat="${key}"] .n`).textContent();
    expect(Number(await stat('calls'))).toBeGreaterThanOrEqual(5);
    expect(await stat('error-rate')).toMatch(/^\d+(\.\d)? %$/);
    expect(Number((await stat('error-rate'))?.split(' ')[0])).toBeGreaterThan(0);
    expect(await stat('throttled')).toBe('1');
    expect(await stat('p50')).toMatch(/^\d+(\.\d)? ms$/);
    expect(await stat('p95')).toMatch(/^\d+(\.\d)? ms$/);

    const rows = page.locator('#latest-calls tr[data-activity]');
    expect(await rows.count()).toBeGreaterThanOrEqual(5);
    expect(await page.locator('tr[data-outcome="throttled"]').count()).toBe(1);
    expect(await page.locator('tr[data-outcome="rejected"] code').first().textContent()).toBe(
      'upstream_rejected',
    );
    // The times are in the browser's zone, by the page's one script (allowed by the dashboard's CSP hash).
    expect(await page.textContent('#tz')).toBe('Europe/Berlin');
    expect(await rows.first().locator('time').textContent()).not.toContain('UTC');

    const sizes = await layout(page);
    for (const part of sizes.parts) {
      expect(part).not.toBeNull();
      expect(part?.height).toBeGreaterThan(20);
      expect(part?.right).toBeLessThanOrEqual(1280);
    }
    for (const part of PARTS) expect(await page.locator(part).isVisible()).toBe(true);
    await page.screenshot({ path: path.join(ARTIFACTS, 'ops-connection.png'), fullPage: true });
    await page.click('a.back');
    await page.waitForURL(/\/ops#connections$/);
    expect(violations).toEqual([]);
    await ctx.close();
  });

  it('at 390 px: every part within the screen, each request a card, the links reachable', async () => {
    const ctx = await context({
      viewport: { width: 390, height: 844 },
      deviceScaleFactor: 3,
      isMobile: true,
      hasTouch: true,
    });
    const page = await ctx.newPage();
    const violations = watchViolations(page);
    await page.goto(`${t.baseUrl}/ops`);
    const link = page.locator(`tr[data-connection="${connectionId}"] a[data-action="activity"]`);
    const box = await link.boundingBox();
    expect(box && box.x >= 0 && box.x + box.width <= 390).toBe(true);
    await link.click();
    await page.waitForURL(`${t.baseUrl}/ops/connections/${connectionId}`);

    const sizes = await layout(page);
    expect(sizes.viewport).toBe(390);
    expect(sizes.page).toBeLessThanOrEqual(390);
    expect(sizes.table.scroll).toBeLessThanOrEqual(sizes.table.width); // cards: nothing hidden to the right
    for (const part of sizes.parts) {
      expect(part).not.toBeNull();
      expect(part?.left).toBeGreaterThanOrEqual(0);
      expect(part?.right).toBeLessThanOrEqual(390);
    }
    for (const part of PARTS) {
      await page.locator(part).scrollIntoViewIfNeeded();
      expect(await page.locator(part).isVisible()).toBe(true);
    }
    // Each request is a card of labelled lines; the stat cards and every link lie within the screen.
    const card = page.locator('#latest-calls tr[data-activity]').first();
    expect(await card.locator('td[data-label="Outcome"]').isVisible()).toBe(true);
    const boxes = await page
      .locator('main a[href], main [data-stat]')
      .evaluateAll((elements) =>
        elements.map((el) => (el as unknown as { getBoundingClientRect(): Box }).getBoundingClientRect()),
      );
    expect(boxes.length).toBeGreaterThanOrEqual(6);
    expect(boxes.filter((b) => b.left < 0 || b.right > 390)).toEqual([]);
    await page.screenshot({ path: path.join(ARTIFACTS, 'ops-connection-phone.png'), fullPage: true });
    expect(violations).toEqual([]);
    await ctx.close();
  });

  it('answers 404 for an unknown connection, and asks for credentials without them', async () => {
    await request(t.baseUrl)
      .get('/ops/connections/00000000-0000-4000-8000-000000000000')
      .auth('ops', t.config.operatorApiKey)
      .expect(404);
    await request(t.baseUrl).get(`/ops/connections/${connectionId}`).expect(401);
  });
});
