import request from 'supertest';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';
import { connectTenant, control, createTenant } from './support/connect';

/** The ops dashboard's forms and messages, as an attacker would try them. */
describe('security: the ops dashboard', () => {
  let t: TestApp;
  let id: string;
  const operator = () => t.config.operatorApiKey;
  const csrfOf = (html: string) => /name="csrf" value="([0-9a-f]+)"/.exec(html)?.[1] as string;

  beforeAll(async () => {
    t = await startTestApp({ LOG_LEVEL: 'silent' });
    await control(t, '/reset');
    await createTenant(t, 'dash');
    id = await connectTenant(t, 'dash');
  });
  afterAll(async () => {
    await t.close();
  });

  it('/ops?done= reflects no text from the URL: the message comes from the stored connection', async () => {
    const attack = await request(t.baseUrl)
      .get('/ops')
      .query({ done: 'Your key expired: log in at https://evil.example' })
      .auth('ops', operator());
    expect(attack.status).toBe(400);
    expect(attack.text).not.toContain('evil.example');
    const page = await request(t.baseUrl).get('/ops').auth('ops', operator()).expect(200);
    const acted = await request(t.baseUrl)
      .post(`/ops/connections/${id}/check`)
      .auth('ops', operator())
      .type('form')
      .send({ csrf: csrfOf(page.text) })
      .expect(303);
    expect(acted.headers.location).toBe(`/ops?done=check&connection=${id}`);
    const after = await request(t.baseUrl).get(acted.headers.location).auth('ops', operator()).expect(200);
    expect(after.text).toContain('check of dash (sandbox): probe ok');
  });

  it('refuses a form post with Origin: null or another origin, even with the right CSRF token', async () => {
    const page = await request(t.baseUrl).get('/ops').auth('ops', operator()).expect(200);
    for (const origin of ['null', 'https://evil.example']) {
      const res = await request(t.baseUrl)
        .post(`/ops/connections/${id}/check`)
        .auth('ops', operator())
        .set('Origin', origin)
        .type('form')
        .send({ csrf: csrfOf(page.text) })
        .expect(403);
      expect(res.body.error.code).toBe('csrf_failed');
    }
    await request(t.baseUrl)
      .post(`/ops/connections/${id}/check`)
      .auth('ops', operator())
      .set('Origin', t.baseUrl)
      .type('form')
      .send({ csrf: csrfOf(page.text) })
      .expect(303);
  });
});
