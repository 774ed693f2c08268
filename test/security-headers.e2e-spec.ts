import { mkdirSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import type { Browser } from 'playwright-core';
import { launchChromium, watchViolations } from './support/browser';
import request from 'supertest';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';
import { RETURN_URL, control, createTenant, op, startConnect } from './support/connect';

const ARTIFACTS = path.join(__dirname, 'artifacts');

/** The directives of a Content-Security-Policy header, by name. */
function csp(header: string | undefined): Record<string, string> {
  expect(header).toBeDefined();
  return Object.fromEntries(
    (header as string)
      .split(';')
      .map((d) => d.trim())
      .filter(Boolean)
      .map((d) => [d.split(/\s+/)[0], d.split(/\s+/).slice(1).join(' ')]),
  );
}

function expectBaseHeaders(res: request.Response): void {
  expect(res.headers['x-content-type-options']).toBe('nosniff');
  expect(res.headers['x-frame-options']).toBe('DENY');
  expect(csp(res.headers['content-security-policy'])['frame-ancestors']).toBe("'none'");
  expect(res.headers['referrer-policy']).toBe('same-origin');
  expect(res.headers['x-request-id']).toBeDefined();
}

describe('security: headers on every answer, CSP per page, no-store', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ OPS_PROBE_INTERVAL_MS: '0' });
    await control(t, '/reset');
    await createTenant(t, 'hdr');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('security headers on every response: API, errors, pages, sandbox, docs, metrics, health', async () => {
    const session = await request(t.baseUrl)
      .post('/v1/tenants/hdr/connect-sessions')
      .set(op)
      .send({ return_url: RETURN_URL })
      .expect(201);
    const { upstream } = await startConnect(t, 'hdr');
    const answers = await Promise.all([
      request(t.baseUrl).get('/v1/tenants/hdr').set(op).expect(200),
      request(t.baseUrl).get('/v1/tenants/hdr'),
      request(t.baseUrl).get('/no/such/route').expect(404),
      request(t.baseUrl).post('/v1/tenants').set(op).set('Content-Type', 'application/json').send('{"id":'),
      request(t.baseUrl).get(new URL(session.body.connect_url).pathname).expect(200),
      request(t.baseUrl).get('/connect/not-a-token').expect(404),
      request(t.baseUrl).get('/oauth/callback?state=nope&code=x').expect(400),
      request(t.baseUrl).get('/ops').auth('ops', t.config.operatorApiKey).expect(200),
      request(t.baseUrl).get(`${upstream.pathname}${upstream.search}`).expect(200),
      request(t.baseUrl).get('/sandbox/api/v2/organizations'),
      request(t.baseUrl).get('/docs').expect(200),
      request(t.baseUrl).get('/docs/openapi.json').expect(200),
      request(t.baseUrl).get('/metrics').expect(200),
      request(t.baseUrl).get('/health/ready').expect(200),
    ]);
    for (const res of answers) expectBaseHeaders(res);
    // HSTS only over https (PUBLIC_BASE_URL here is http://127.0.0.1:…).
    for (const res of answers) expect(res.headers['strict-transport-security']).toBeUndefined();
    expect(answers[0].headers['x-powered-by']).toBeUndefined();
  });

  it('CSP of the gateway pages: nothing loads, inline styles only, forms post to the gateway itself', async () => {
    const session = await request(t.baseUrl)
      .post('/v1/tenants/hdr/connect-sessions')
      .set(op)
      .send({})
      .expect(201);
    const pages = [
      await request(t.baseUrl).get(new URL(session.body.connect_url).pathname).expect(200),
      await request(t.baseUrl).get('/ops').auth('ops', t.config.operatorApiKey).expect(200),
      await request(t.baseUrl).get('/oauth/callback?state=nope&code=x').expect(400),
    ];
    for (const page of pages) {
      expect(page.headers['content-type']).toMatch(/text\/html/);
      // /ops alone adds its one inline script (local times), by hash; test/ops-dashboard.e2e-spec.ts checks the hash.
      const ops = page === pages[1];
      expect(csp(page.headers['content-security-policy'])).toEqual({
        'default-src': "'none'",
        ...(ops ? { 'script-src': expect.stringMatching(/^'sha256-[A-Za-z0-9+/]{43}='$/) } : {}),
        'style-src': "'unsafe-inline'",
        'form-action': "'self'",
        'frame-ancestors': "'none'",
        'base-uri': "'none'",
      });
      const text = ops ? page.text.replace(/<script>[^<]*<\/script>(?=<\/body>)/, '') : page.text;
      expect(text).not.toMatch(/<script|<link|<img|<iframe|\son[a-z]+=/i); // nothing the policy would have to allow
    }
    // The connect page's button is a link to the gateway (the redirect to the rewards service happens server-side).
    expect(pages[0].text).toMatch(/<a class="button" id="connect" href="[A-Za-z0-9_-]{43}\/authorize"/);
  });

  it('CSP of the sandbox consent page: its form may redirect on to the client (no form-action restriction)', async () => {
    const { upstream } = await startConnect(t, 'hdr');
    const consent = await request(t.baseUrl).get(`${upstream.pathname}${upstream.search}`).expect(200);
    const policy = csp(consent.headers['content-security-policy']);
    expect(policy).toEqual({
      'default-src': "'none'",
      'style-src': "'unsafe-inline'",
      'frame-ancestors': "'none'",
      'base-uri': "'none'",
    });
    expect(consent.text).toContain('<form method="post" action="authorize/decision">');
    expect(consent.text).not.toMatch(/<script|<link|<img/i);
  });

  it('CSP of /docs (Swagger UI): its own scripts and stylesheet only, and every asset it references is served', async () => {
    const docs = await request(t.baseUrl).get('/docs').expect(200);
    const policy = csp(docs.headers['content-security-policy']);
    expect(policy['script-src']).toBe("'self'");
    expect(policy['default-src']).toBe("'none'");
    expect(policy['connect-src']).toBe(`'self' ${t.baseUrl}`);
    expect(docs.text).not.toMatch(/<script>[^<]*\S[^<]*<\/script>/); // no inline script: script-src 'self' suffices
    const assets = [...docs.text.matchAll(/<(?:script[^>]*\ssrc|link[^>]*\shref)=["']([^"']+)["']/g)].map(
      (m) => m[1],
    );
    const paths = assets.map((a) => new URL(a, `${t.baseUrl}/docs`).pathname);
    expect(paths).toEqual(
      expect.arrayContaining([
        '/docs/swagger-ui-bundle.js',
        '/docs/swagger-ui-init.js',
        '/docs/swagger-ui.css',
      ]),
    );
    for (const [i, asset] of paths.entries()) {
      const res = await request(t.baseUrl).get(asset).expect(200);
      expect(assets[i]).toMatch(/^\.\/docs\//); // same origin
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['content-type']).toMatch(
        asset.endsWith('.js') ? /javascript/ : asset.endsWith('.css') ? /text\/css/ : /image\/png/,
      );
      expect(res.headers['cache-control']).not.toBe('no-store'); // static files: cacheable
    }
  });

  it('Cache-Control: no-store on the one-time secrets (API key, connect link), every API answer and every HTML page', async () => {
    const key = await request(t.baseUrl)
      .post('/v1/tenants/hdr/api-keys')
      .set(op)
      .send({ name: 'svc' })
      .expect(201);
    expect(key.body.key).toMatch(/^rgk_/);
    const session = await request(t.baseUrl)
      .post('/v1/tenants/hdr/connect-sessions')
      .set(op)
      .send({})
      .expect(201);
    const answers = [
      key,
      session,
      await request(t.baseUrl).get('/v1/tenants/hdr').set(op).expect(200),
      await request(t.baseUrl).get('/v1/tenants/hdr/api-keys').set(op).expect(200),
      await request(t.baseUrl).get('/v1/tenants/nobody').set(op).expect(404),
      await request(t.baseUrl).get(new URL(session.body.connect_url).pathname).expect(200),
      await request(t.baseUrl).get('/ops').auth('ops', t.config.operatorApiKey).expect(200),
      await request(t.baseUrl).get('/oauth/callback?state=nope&code=x').expect(400),
      await request(t.baseUrl).get('/docs').expect(200),
      await request(t.baseUrl).get('/no/such/route').expect(404),
    ];
    for (const res of answers) expect(res.headers['cache-control']).toBe('no-store');
  });
});

describe('security: the pages in Chromium under their CSP (no violation, everything still works)', () => {
  let t: TestApp;
  let browser: Browser;
  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    t = await startTestApp({ OPS_PROBE_INTERVAL_MS: '0' });
    await control(t, '/reset');
    await createTenant(t, 'csp');
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it('/docs: Swagger UI renders every operation with its CSP, no violation', async () => {
    const page = await browser.newPage();
    const violations = watchViolations(page);
    await page.goto(`${t.baseUrl}/docs`);
    await page.waitForSelector('.swagger-ui .info .title');
    expect(await page.textContent('.swagger-ui .info .title')).toContain('Rewards Gateway');
    await page.waitForSelector('.opblock-summary-path[data-path="/v1/tenants/{tenant}/rewards"]');
    // Open one operation (React renders it) and its schema: still no violation.
    await page.click('.opblock-summary-path[data-path="/v1/tenants/{tenant}"]');
    await page.waitForSelector('.opblock.is-open');
    await page.screenshot({ path: path.join(ARTIFACTS, 'docs-under-csp.png') });
    expect(violations).toEqual([]);
    await page.close();
  });

  it('the connect page, the sandbox consent page and the dashboard work under their CSP, no violation', async () => {
    const page = await browser.newPage();
    const violations = watchViolations(page);
    const session = await request(t.baseUrl)
      .post('/v1/tenants/csp/connect-sessions')
      .set(op)
      .send({})
      .expect(201);
    await page.goto(session.body.connect_url as string);
    const accent = await page
      .locator('main')
      .evaluate(
        (m) =>
          (
            globalThis as unknown as { getComputedStyle(e: unknown): { borderTopWidth: string } }
          ).getComputedStyle(m).borderTopWidth,
      );
    expect(accent).toBe('5px'); // the inline <style> applies
    await page.click('#connect');
    await page.waitForSelector('#approve');
    await page.click('#approve');
    await page.waitForSelector('text=Rewards account connected');
    await page.close();

    const context = await browser.newContext({
      httpCredentials: { username: 'ops', password: t.config.operatorApiKey },
    });
    const ops = await context.newPage();
    const opsViolations = watchViolations(ops);
    await ops.goto(`${t.baseUrl}/ops`);
    const badge = ops.locator('span.badge').first();
    const colour = await badge.evaluate(
      (b) =>
        (
          globalThis as unknown as { getComputedStyle(e: unknown): { backgroundColor: string } }
        ).getComputedStyle(b).backgroundColor,
    );
    expect(colour).toBe('rgb(21, 128, 61)'); // the style attribute applies (healthy)
    await ops.locator('button[data-action="check"]').first().click();
    await ops.waitForSelector('#flash');
    expect(await ops.textContent('#flash')).toContain('check of csp');
    await context.close();
    expect([...violations, ...opsViolations]).toEqual([]);
  });

  it('framing is refused: a page of another origin cannot frame the connect page or /docs', async () => {
    const session = await request(t.baseUrl)
      .post('/v1/tenants/csp/connect-sessions')
      .set(op)
      .send({})
      .expect(201);
    const targets = [session.body.connect_url as string, `${t.baseUrl}/docs`];
    const framer = createServer((_req, res) => {
      res.setHeader('Content-Type', 'text/html');
      res.end(
        `<!doctype html><title>framer</title>${targets.map((u, i) => `<iframe id="f${i}" src="${u}"></iframe>`).join('')}`,
      );
    });
    await new Promise<void>((r) => framer.listen(0, '127.0.0.1', () => r()));
    const page = await browser.newPage();
    const blocked: string[] = [];
    page.on('console', (msg) => {
      if (/frame-ancestors|X-Frame-Options/i.test(msg.text())) blocked.push(msg.text());
    });
    try {
      // localhost and 127.0.0.1 are different origins.
      await page.goto(`http://localhost:${(framer.address() as AddressInfo).port}/`);
      await page.waitForTimeout(1500);
      for (const target of targets) {
        const frame = page.frames().find((f) => f !== page.mainFrame() && f.url() === target);
        const rendered = frame
          ? await frame
              .evaluate(
                () =>
                  (globalThis as unknown as { document: { body: { innerHTML: string } | null } }).document
                    .body?.innerHTML ?? '',
              )
              .catch(() => '')
          : '';
        expect(rendered).not.toMatch(/Connect rewards account|swagger-ui/);
      }
      expect(blocked.length).toBeGreaterThanOrEqual(targets.length);
    } finally {
      await page.close();
      await new Promise<void>((r) => framer.close(() => r()));
    }
  });
});

// Last: an app with another PUBLIC_BASE_URL re-registers the process-wide passport strategies.
describe('security: HSTS', () => {
  it('HSTS only when PUBLIC_BASE_URL is https', async () => {
    const https = await startTestApp({
      PUBLIC_BASE_URL: 'https://gateway.example.com',
      OPS_PROBE_INTERVAL_MS: '0',
    });
    try {
      for (const p of ['/health/live', '/no/such/route', '/docs', '/connect/not-a-token']) {
        const res = await request(https.baseUrl).get(p);
        expect(res.headers['strict-transport-security']).toBe('max-age=31536000; includeSubDomains');
        expectBaseHeaders(res);
      }
    } finally {
      await https.close();
    }
  });
});
