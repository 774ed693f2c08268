import request from 'supertest';
import { EMBEDDED_SANDBOX_CLIENT } from '../src/config/app-config';
import type { TestApp } from './support/app';
import { startTestApp } from './support/app';

describe('the sandbox mounted in the gateway under /sandbox', () => {
  let t: TestApp;
  let noControl: TestApp;
  beforeAll(async () => {
    [t, noControl] = await Promise.all([startTestApp(), startTestApp({ SANDBOX_CONTROL_ENABLED: 'false' })]);
  });
  afterAll(async () => {
    await Promise.all([t.close(), noControl.close()]);
  });

  it('is the configured sandbox environment, with the gateway callback pre-registered', async () => {
    expect(t.config.rewards.sandbox).toMatchObject({
      baseUrl: `${t.baseUrl}/sandbox`,
      embedded: true,
      clientId: EMBEDDED_SANDBOX_CLIENT.clientId,
    });
    const consent = await request(t.baseUrl)
      .get('/sandbox/oauth/authorize')
      .query({
        client_id: EMBEDDED_SANDBOX_CLIENT.clientId,
        redirect_uri: `${t.baseUrl}/oauth/callback`,
        response_type: 'code',
      })
      .expect(200);
    expect(consent.text).toContain('Approve');
  });

  it('speaks the service’s own error shape, not the gateway’s', async () => {
    const res = await request(t.baseUrl).get('/sandbox/api/v2/fields').expect(401);
    expect(res.body).toEqual({ errors: { message: expect.any(String), payload: {} } });
    const form = await request(t.baseUrl)
      .post('/sandbox/oauth/token')
      .type('form')
      .send({ grant_type: 'refresh_token' })
      .expect(401);
    expect(form.body.error).toBe('invalid_client');
  });

  it('serves the control API only when SANDBOX_CONTROL_ENABLED is on', async () => {
    await request(t.baseUrl).get('/sandbox/__control/stats').expect(200);
    await request(noControl.baseUrl).get('/sandbox/__control/stats').expect(404);
  });
});

describe('where the built-in sandbox is mounted', () => {
  const production = {
    REWARDS_PRODUCTION_BASE_URL: 'https://rewards.example.com',
    REWARDS_PRODUCTION_CLIENT_ID: 'prod-client',
    REWARDS_PRODUCTION_CLIENT_SECRET: 'prod-secret-value',
  };

  it('is not mounted on a production-only gateway: /sandbox answers 404 and its demo credentials open nothing', async () => {
    const t = await startTestApp(production);
    try {
      expect(t.config.mountSandbox).toBe(false);
      expect(t.config.rewards.sandbox).toBeUndefined();
      await request(t.baseUrl)
        .get('/sandbox/oauth/authorize')
        .query({ client_id: EMBEDDED_SANDBOX_CLIENT.clientId, response_type: 'code' })
        .expect(404);
      await request(t.baseUrl)
        .post('/sandbox/oauth/token')
        .type('form')
        .send({ grant_type: 'client_credentials' })
        .expect(404);
      await request(t.baseUrl).get('/sandbox/__control/stats').expect(404);
    } finally {
      await t.close();
    }
  });

  it('is mounted beside production when SANDBOX_ENABLED=true', async () => {
    const t = await startTestApp({ ...production, SANDBOX_ENABLED: 'true' });
    try {
      expect(t.config.mountSandbox).toBe(true);
      await request(t.baseUrl).get('/sandbox/__control/stats').expect(200);
    } finally {
      await t.close();
    }
  });
});
