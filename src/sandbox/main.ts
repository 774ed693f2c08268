import { createSandbox } from './sandbox.app';
import { EMBEDDED_SANDBOX_CLIENT } from '../config/app-config';
import { terminate } from '../common/terminate';

/**
 * `npm run sandbox`: the emulator alone. SANDBOX_PORT (4010), SANDBOX_CLIENT_ID / SANDBOX_CLIENT_SECRET (the
 * built-in demo app's), SANDBOX_REDIRECT_URIS (comma-separated; default http://localhost:3000/oauth/callback),
 * SANDBOX_CONTROL_ENABLED (false), SANDBOX_AUTO_APPROVE (false), SANDBOX_ACCESS_TOKEN_TTL (7200 s),
 * SANDBOX_RATE_LIMIT_RPS (10: requests per account in any 1-second interval, as the service documents; 0 = off —
 * the sandbox mounted in the gateway has no limit unless set through /__control/settings),
 * SANDBOX_ORDER_SHAPE (`single`: one `reward` per order, the current service; `array`: the older `rewards: [...]`).
 */
const env = process.env;
const port = Number(env.SANDBOX_PORT ?? 4010);
const flag = (v: string | undefined) => ['1', 'true', 'yes', 'on'].includes((v ?? '').toLowerCase());
const rateLimitRps = Number(env.SANDBOX_RATE_LIMIT_RPS ?? 10);
if (!Number.isInteger(rateLimitRps) || rateLimitRps < 0)
  throw new Error('SANDBOX_RATE_LIMIT_RPS must be a whole number >= 0');
const orderShape = (env.SANDBOX_ORDER_SHAPE ?? 'single').toLowerCase();
if (orderShape !== 'single' && orderShape !== 'array')
  throw new Error('SANDBOX_ORDER_SHAPE must be single or array');
const sandbox = createSandbox({
  clients: [
    {
      clientId: env.SANDBOX_CLIENT_ID ?? EMBEDDED_SANDBOX_CLIENT.clientId,
      clientSecret: env.SANDBOX_CLIENT_SECRET ?? EMBEDDED_SANDBOX_CLIENT.clientSecret,
      redirectUris: (env.SANDBOX_REDIRECT_URIS ?? 'http://localhost:3000/oauth/callback')
        .split(',')
        .map((u) => u.trim()),
      name: 'Rewards Gateway',
    },
  ],
  control: flag(env.SANDBOX_CONTROL_ENABLED),
  settings: {
    autoApprove: flag(env.SANDBOX_AUTO_APPROVE),
    rateLimitRps,
    orderShape,
    ...(env.SANDBOX_ACCESS_TOKEN_TTL ? { accessTokenTtlSeconds: Number(env.SANDBOX_ACCESS_TOKEN_TTL) } : {}),
  },
});
const server = sandbox.app.listen(port, env.SANDBOX_HOST ?? '127.0.0.1', () => {
  process.stdout.write(
    `Rewards sandbox listening on http://${env.SANDBOX_HOST ?? '127.0.0.1'}:${port}` +
      `${flag(env.SANDBOX_CONTROL_ENABLED) ? ' (control API on /__control)' : ''}\n`,
  );
});
server.keepAliveTimeout = 65_000;
const stop = () => {
  void sandbox.close();
  server.close(() => terminate(0));
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
