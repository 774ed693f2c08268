import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import type { Browser } from 'playwright-core';
import { launchChromium, watchViolations } from './support/browser';
import request from 'supertest';
import type { TestApp } from './support/app';
import { OPERATOR_KEY, startTestApp } from './support/app';
import { control, op } from './support/connect';

/** Debian's chromium (installed by .ci/run); the flags keep it off the closed network. */
const ARTIFACTS = path.join(__dirname, 'artifacts');

describe('the two web pages in a real browser (headless Chromium)', () => {
  let t: TestApp;
  let browser: Browser;
  let platform: Server;
  let platformUrl: string;
  // A DATA_DIR holding the operator key, as `npm start` generates it: the start page then names its file.
  const dataDir = mkdtempSync(path.join(tmpdir(), 'rg-browser-'));

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    // The platform's own settings page that the connect flow returns to.
    platform = createServer((req, res) => {
      const status = new URL(req.url ?? '/', 'http://x').searchParams;
      res.setHeader('Content-Type', 'text/html');
      res.end(
        `<!doctype html><title>Platform</title><h1 id="result">Rewards: ${status.get('status')} ${status.get('error') ?? ''}</h1>`,
      );
    });
    await new Promise<void>((r) => platform.listen(0, '127.0.0.1', () => r()));
    platformUrl = `http://127.0.0.1:${(platform.address() as AddressInfo).port}/settings/rewards`;
    writeFileSync(path.join(dataDir, 'operator-api-key'), `${OPERATOR_KEY}\n`, { mode: 0o600 });
    t = await startTestApp({ OPS_PROBE_INTERVAL_MS: '0', DATA_DIR: dataDir });
    await control(t, '/reset');
    await request(t.baseUrl)
      .post('/v1/tenants')
      .set(op)
      .send({ id: 'acme', name: 'Acme Corp', return_urls: [platformUrl] })
      .expect(201);
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
    await new Promise<void>((r) => platform.close(() => r()));
  });

  async function connectLink(): Promise<string> {
    const res = await request(t.baseUrl)
      .post('/v1/tenants/acme/connect-sessions')
      .set(op)
      .send({ return_url: platformUrl })
      .expect(201);
    return res.body.connect_url as string;
  }

  it('a tenant admin connects: Connect → approve at the rewards service → back on the platform, connection active', async () => {
    const page = await browser.newPage();
    await page.goto(await connectLink());
    await expectText(page.locator('main'), 'Acme Corp');
    // It says where the user lands after approving: the platform's page (its host).
    await expectText(page.locator('#next'), `sent back to ${new URL(platformUrl).host}`);
    await page.screenshot({ path: path.join(ARTIFACTS, 'connect-page.png'), fullPage: true });
    await page.click('#connect');
    await page.waitForSelector('#approve');
    await page.screenshot({ path: path.join(ARTIFACTS, 'sandbox-consent.png'), fullPage: true });
    await page.click('#approve');
    await page.waitForURL(/settings\/rewards\?status=connected/);
    expect(await page.textContent('#result')).toContain('connected');
    await page.screenshot({ path: path.join(ARTIFACTS, 'connected-return.png') });
    const connection = await request(t.baseUrl).get('/v1/tenants/acme/connection').set(op).expect(200);
    expect(connection.body.status).toBe('active');
    await page.close();
  });

  it('without a return_url: Connect → approve → the gateway’s own "Rewards account connected" page', async () => {
    const page = await browser.newPage();
    const { body } = await request(t.baseUrl).post('/v1/tenants/acme/connect-sessions').set(op).expect(201);
    await page.goto(body.connect_url as string);
    await expectText(page.locator('#next'), 'a page of this gateway that confirms it');
    await page.click('#connect');
    await page.click('#approve');
    await page.waitForURL(`${t.baseUrl}/oauth/callback?**`);
    expect(await page.textContent('h1')).toBe('Rewards account connected');
    await expectText(
      page.locator('main'),
      'Acme Corp can now send rewards through your rewards account (sandbox).',
    );
    await page.screenshot({ path: path.join(ARTIFACTS, 'connected-page.png') });
    await page.close();
  });

  it('the start page at 1,280 px: every command in sight (wrapped, none scrolls in its box), the key file as in the banner', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const violations = watchViolations(page);
    await page.goto(`${t.baseUrl}/`);
    const blocks = await page.locator('pre, code').evaluateAll((elements) =>
      elements.map((el) => {
        const e = el as unknown as {
          scrollWidth: number;
          clientWidth: number;
          textContent: string;
          tagName: string;
        };
        return {
          tag: e.tagName,
          text: e.textContent.slice(0, 60),
          scroll: e.scrollWidth,
          width: e.clientWidth,
        };
      }),
    );
    expect(blocks.filter((b) => b.scroll > b.width)).toEqual([]);
    expect(blocks.filter((b) => b.tag === 'PRE').length).toBeGreaterThanOrEqual(5);
    const layout = await page.evaluate(() => {
      const d = (globalThis as unknown as { document: Layout }).document;
      return {
        page: d.documentElement.scrollWidth,
        main: (d.querySelector('main') as LayoutElement).getBoundingClientRect().width,
      };
    });
    expect(layout.page).toBeLessThanOrEqual(1280);
    expect(layout.main).toBeGreaterThan(1100); // the page's width is used, not a narrow column
    const text = (await page.textContent('main')) ?? '';
    expect(text).toContain(`export OPERATOR_KEY=$(cat ${path.join(dataDir, 'operator-api-key')})`);
    expect(text).toContain('-H "Authorization: Bearer $API_KEY"'); // the sends use the tenant's own key
    expect(text).not.toContain(OPERATOR_KEY);
    await page.screenshot({ path: path.join(ARTIFACTS, 'home-1280.png'), fullPage: true });
    expect(violations).toEqual([]);
    await page.close();
  });

  it('a tenant admin who denies sees the denial', async () => {
    const page = await browser.newPage();
    await page.goto(await connectLink());
    await page.click('#connect');
    await page.click('#deny');
    await page.waitForURL(/status=error&error=access_denied/);
    expect(await page.textContent('#result')).toContain('access_denied');
    await page.screenshot({ path: path.join(ARTIFACTS, 'denied-return.png') });
    await page.close();
  });

  it('an operator opens /ops, sees the broken connection highlighted, and presses Check', async () => {
    // Break the connection: the account holder revokes the app, then a refresh learns it.
    const stats = (await request(t.baseUrl).get('/sandbox/__control/stats')).body;
    await request(t.baseUrl)
      .post(`/sandbox/__control/grants/${stats.grants.at(-1).id}/revoke`)
      .send({});
    const { body: connection } = await request(t.baseUrl).get('/v1/tenants/acme/connection').set(op);
    await request(t.baseUrl).post(`/v1/ops/connections/${connection.id}/refresh`).set(op).expect(201);

    const context = await browser.newContext({
      httpCredentials: { username: 'ops', password: t.config.operatorApiKey },
    });
    const page = await context.newPage();
    await page.setViewportSize({ width: 1440, height: 900 });
    await page.goto(`${t.baseUrl}/ops`);
    const row = page.locator(`tr[data-connection="${connection.id}"]`);
    expect(await row.getAttribute('class')).toBe('health-broken');
    await expectText(row, 'needs_reauth');
    type Styled = { getComputedStyle(element: unknown): { backgroundColor: string } };
    const background = await row
      .locator('td')
      .first()
      .evaluate((td) => (globalThis as unknown as Styled).getComputedStyle(td).backgroundColor);
    expect(background).toBe('rgb(254, 242, 242)'); // highlighted
    await page.screenshot({ path: path.join(ARTIFACTS, 'ops-dashboard.png'), fullPage: true });
    await row.locator('button[data-action="check"]').click();
    await page.waitForSelector('#flash');
    expect(await page.textContent('#flash')).toContain('check of acme');
    await page.locator(`tr[data-connection="${connection.id}"] + tr.events summary`).click();
    await expectText(page.locator(`tr[data-connection="${connection.id}"] + tr.events`), 'probe');
    await page.screenshot({ path: path.join(ARTIFACTS, 'ops-after-check.png'), fullPage: true });
    await context.close();
  });

  it('refuses the dashboard without operator credentials', async () => {
    const context = await browser.newContext();
    const res = await context.request.get(`${t.baseUrl}/ops`);
    expect(res.status()).toBe(401);
    expect(res.headers()['www-authenticate']).toContain('Basic');
    // A browser without credentials is asked for them and gets nothing else.
    await expect(context.newPage().then((p) => p.goto(`${t.baseUrl}/ops`))).rejects.toThrow(/AUTH/);
    await context.close();
  });
});

async function expectText(locator: { textContent(): Promise<string | null> }, text: string): Promise<void> {
  expect(await locator.textContent()).toContain(text);
}

/** What the page's script sees (typed here: the test compiles without the DOM library). */
interface LayoutElement {
  getBoundingClientRect(): { width: number };
}
interface Layout {
  documentElement: { scrollWidth: number };
  querySelector(selector: string): LayoutElement | null;
}
