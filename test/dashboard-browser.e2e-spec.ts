import { mkdirSync } from 'node:fs';
import * as path from 'node:path';
import type { Browser, BrowserContext } from 'playwright-core';
import request from 'supertest';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';
import { launchChromium, watchViolations } from './support/browser';
import { connectTenant, control, createTenant } from './support/connect';
import { sqlOn } from './support/database';
import { reward, send } from './support/send';

const ARTIFACTS = path.join(__dirname, 'artifacts');

/** What the page's script sees (typed here: the test compiles without the DOM library). */
interface Doc {
  documentElement: { scrollWidth: number; clientWidth: number };
  querySelector(selector: string): {
    scrollWidth: number;
    clientWidth: number;
    scrollLeft: number;
    getBoundingClientRect(): { width: number; height: number; right: number };
  } | null;
}

/**
 * The /ops dashboard in headless Chromium (Debian's, see support/browser.ts): logged in with HTTP Basic, the summary and
 * the last hour's plot drawn with data, every time shown in the browser's time zone by the page's one inline script
 * (allowed by its hash: no CSP violation), and on a 390 px phone nothing wider than the screen but the tables, which
 * scroll inside their own containers.
 */
describe('the ops dashboard in a real browser (headless Chromium)', () => {
  let t: TestApp;
  let browser: Browser;
  const operator = () => t.config.operatorApiKey;

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    t = await startTestApp({ LOG_LEVEL: 'silent', OPS_PROBE_INTERVAL_MS: '0' });
    await control(t, '/reset');
    for (const tenant of ['acme', 'globex', 'initech']) {
      await createTenant(t, tenant);
      await connectTenant(t, tenant);
    }
    await sqlOn(t.databaseUrl, `UPDATE connections SET status = 'needs_reauth' WHERE tenant_id = 'globex'`);
    await send(t, 'acme', 'browser-1', {
      rewards: [reward(), reward({ recipient: { name: 'B', email: 'b@example.com' } })],
    }).expect(201);
    await send(t, 'initech', 'browser-2', { rewards: [reward()] }).expect(201);
    await send(t, 'acme', 'browser-3', { rewards: [reward({ products: ['PRODUNKNOWN'] })] }).expect(422);
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  const operatorContext = (options: Parameters<Browser['newContext']>[0] = {}): Promise<BrowserContext> =>
    browser.newContext({
      httpCredentials: { username: 'ops', password: operator() },
      timezoneId: 'Asia/Tokyo',
      locale: 'en-GB',
      ...options,
    });

  it('logs in with Basic and shows the summary, the plot with its bars and points, in Tokyo time, no CSP violation', async () => {
    const context = await operatorContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const violations = watchViolations(page);
    const response = await page.goto(`${t.baseUrl}/ops`);
    expect(response?.status()).toBe(200);
    expect(response?.headers()['content-security-policy']).toMatch(/script-src 'sha256-[A-Za-z0-9+/]{43}='/);

    // The summary: 3 connections, 2 active (healthy), 1 needs_reauth (broken).
    const count = (selector: string) => page.locator(`${selector} .n`).textContent();
    expect(await count('[data-status="active"]')).toBe('2');
    expect(await count('[data-status="needs_reauth"]')).toBe('1');
    expect(await count('[data-health="healthy"]')).toBe('2');
    expect(await count('[data-health="broken"]')).toBe('1');
    expect(await page.locator('#summary').isVisible()).toBe(true);

    // The plot: 3 sent in bars, 1 failure as a point, drawn at a real size.
    const plot = page.locator('svg.plot');
    expect(await plot.getAttribute('role')).toBe('img');
    expect(await plot.getAttribute('aria-label')).toMatch(/: 3 sent, 1 failed;/);
    const bars = plot.locator('rect.sent');
    expect(await bars.count()).toBeGreaterThanOrEqual(1);
    const counted = await bars.evaluateAll((rects) =>
      rects.reduce(
        (sum, r) => sum + Number((r as unknown as { dataset: { count: string } }).dataset.count),
        0,
      ),
    );
    expect(counted).toBe(3);
    const box = await bars.first().boundingBox();
    expect(box?.height).toBeGreaterThan(20);
    expect(await plot.locator('circle.failed').count()).toBe(1);
    expect((await plot.boundingBox())?.width).toBeGreaterThan(600);

    // Times: rewritten to the browser's zone (Asia/Tokyo, UTC+9), the UTC text kept as the tooltip.
    expect(await page.textContent('#tz')).toBe('Asia/Tokyo');
    const times = await page.locator('time[datetime]').evaluateAll((elements) =>
      elements.map((el) => {
        const time = el as unknown as { getAttribute(n: string): string; textContent: string; title: string };
        return { iso: time.getAttribute('datetime'), text: time.textContent, title: time.title };
      }),
    );
    expect(times.length).toBeGreaterThan(3);
    for (const { iso, text, title } of times) {
      expect(title).toBe(`${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC`);
      expect(text).not.toContain('UTC');
      expect(text).toBe(new Date(iso).toLocaleString('en-GB', { timeZone: 'Asia/Tokyo' }));
      // en-GB: "dd/mm/yyyy, hh:mm:ss" — nine hours after the UTC time.
      const m = /^(\d\d)\/(\d\d)\/(\d{4}), (\d\d):(\d\d):(\d\d)$/.exec(text);
      expect(m).not.toBeNull();
      const [, dd, mm, yyyy, hh, mi, ss] = m as RegExpExecArray;
      const shown = Date.UTC(+yyyy, +mm - 1, +dd, +hh, +mi, +ss);
      expect(shown - Math.floor(new Date(iso).getTime() / 1000) * 1000).toBe(9 * 3600_000);
    }

    await page.screenshot({ path: path.join(ARTIFACTS, 'ops-overview.png'), fullPage: true });
    expect(violations).toEqual([]);
    await context.close();
  });

  it('on a 390 px phone: nothing overflows the page, the plot scales, each connection is a card with its buttons in sight', async () => {
    const context = await operatorContext({
      viewport: { width: 390, height: 844 },
      deviceScaleFactor: 3,
      isMobile: true,
      hasTouch: true,
    });
    const page = await context.newPage();
    const violations = watchViolations(page);
    await page.goto(`${t.baseUrl}/ops`);
    const sizes = await page.evaluate(() => {
      const d = (globalThis as unknown as { document: Doc }).document;
      const table = d.querySelector('#connections-table');
      const plot = d.querySelector('svg.plot');
      const summary = d.querySelector('#summary');
      if (!table || !plot || !summary) throw new Error('missing part');
      return {
        page: d.documentElement.scrollWidth,
        viewport: d.documentElement.clientWidth,
        tableScroll: table.scrollWidth,
        tableWidth: table.clientWidth,
        plot: plot.getBoundingClientRect(),
        summaryRight: summary.getBoundingClientRect().right,
      };
    });
    expect(sizes.viewport).toBe(390);
    expect(sizes.page).toBeLessThanOrEqual(390);
    expect(sizes.tableScroll).toBeLessThanOrEqual(sizes.tableWidth); // nothing hidden to the right of the cards
    expect(sizes.tableWidth).toBeLessThanOrEqual(390);
    expect(sizes.plot.width).toBeLessThanOrEqual(390);
    expect(sizes.plot.width).toBeGreaterThan(300);
    expect(sizes.plot.height).toBeGreaterThan(100); // scaled with its viewBox, not squashed
    expect(sizes.summaryRight).toBeLessThanOrEqual(390);

    // Every action of the page — buttons, links, the filters' fields — lies within the screen's width: reachable by
    // scrolling down only. (None sits in a region that scrolls sideways.)
    const actions = page.locator('main button, main a[href], main select, main input:not([type="hidden"])');
    const boxes = await actions.evaluateAll((elements) =>
      elements.map((el) => {
        const box = (
          el as unknown as { getBoundingClientRect(): { left: number; right: number } }
        ).getBoundingClientRect();
        const name = (el as unknown as { outerHTML: string }).outerHTML.slice(0, 80);
        return { name, left: box.left, right: box.right };
      }),
    );
    expect(boxes.length).toBeGreaterThan(15); // summary cards, filters, and Check / Refresh of 3 connections
    expect(boxes.filter((b) => b.left < 0 || b.right > 390)).toEqual([]);
    // The cards show their labels, and the buttons work from there.
    const acme = page.locator('tr[data-tenant="acme"]');
    expect(await acme.locator('td[data-label="Health"]').textContent()).toContain('healthy');
    await page.screenshot({ path: path.join(ARTIFACTS, 'ops-phone.png'), fullPage: true });
    for (const [action, flash] of [
      ['check', /^check of acme \(sandbox\): probe ok$/],
      ['refresh', /^refresh of acme \(sandbox\): status active$/],
    ] as const) {
      const button = page.locator(`tr[data-tenant="acme"] button[data-action="${action}"]`);
      const box = await button.boundingBox();
      expect(box && box.x >= 0 && box.x + box.width <= 390).toBe(true);
      await button.click();
      await page.waitForSelector('#flash');
      expect(await page.textContent('#flash')).toMatch(flash);
    }
    // The filters: health = broken leaves the one broken connection; its summary card leads to the same list.
    await page.selectOption('select[name="health"]', 'broken');
    await page.click('form.filters button[type="submit"]');
    await page.waitForURL(/health=broken/);
    expect(await page.locator('tr[data-connection]').evaluateAll((rows) => rows.length)).toBe(1);
    expect(await page.locator('tr[data-connection]').getAttribute('data-tenant')).toBe('globex');
    await page.click('[data-status="active"] a');
    await page.waitForURL(/status=active/);
    expect(await page.locator('tr[data-connection]').evaluateAll((rows) => rows.length)).toBe(2);
    expect(violations).toEqual([]);
    await context.close();
  });

  it('without credentials /ops answers 401 with a Basic challenge, so the browser asks', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const answers: { status: number; challenge?: string }[] = [];
    page.on('response', (r) => {
      if (r.url() === `${t.baseUrl}/ops`)
        answers.push({ status: r.status(), challenge: r.headers()['www-authenticate'] });
    });
    const response = await page.goto(`${t.baseUrl}/ops`).catch((error: Error) => error);
    // Chromium answers the challenge itself: with no credentials to give, the navigation ends in an auth error…
    if (response instanceof Error) expect(response.message).toMatch(/AUTH/);
    else expect(response?.status()).toBe(401);
    // …after the 401 with its challenge.
    expect(answers[0]).toEqual({
      status: 401,
      challenge: expect.stringMatching(/^Basic realm="Rewards Gateway ops"/),
    });
    const direct = await request(t.baseUrl).get('/ops').expect(401);
    expect(direct.headers['www-authenticate']).toMatch(/^Basic /);
    await context.close();
  });
});
