import { createSandbox } from './sandbox.app';
import { EMBEDDED_SANDBOX_CLIENT } from '../config/app-config';
import { terminate } from '../common/terminate';

/**
 * `npm run sandbox`: the emulator alone. SANDBOX_PORT (4010), SANDBOX_CLIENT_ID / SANDBOX_CLIENT_SECRET (the
 * built-in demo app's), SANDBOX_REDIRECT_URIS (comma-separated; default http://localhost:3000/oauth/callback),
 * SANDBOX_CONTROL_ENABLED (false), SANDBOX_AUTO_APPROVE (false), SANDBOX_ACCESS_TOKEN_TTL (7200 s).
 */
const env = process.env;
const port = Number(env.SANDBOX_PORT ?? 4010);
const flag = (v: string | undefined) => ['1', 'true', 'yes', 'on'].includes((v ?? '').toLowerCase());
const sandbox = createSandbox({
  clients: [
    {
      clientId: env.SANDBOX_CLIENT_ID ?? EMBEDDED_SANDBOX_CLIENT.clientId,
      clientSecret: env.SANDBOX_CLIENT_SECRET ?? EMBEDDED_SANDBOX_CLIENT.clientSecret,
      redirectUris: (env.SANDBOX_REDIRECT_URIS ?? 'http://localhost:3000/oauth/callback').split(',').map((u) => u.trim()),
      name: 'Rewards Gateway',
    },
  ],
  control: flag(env.SANDBOX_CONTROL_ENABLED),
  settings: {
    autoApprove: flag(env.SANDBOX_AUTO_APPROVE),
    ...(env.SANDBOX_ACCESS_TOKEN_TTL ? { accessTokenTtlSeconds: Number(env.SANDBOX_ACCESS_TOKEN_TTL) } : {}),
  },
});
const server = sandbox.app.listen(port, env.SANDBOX_HOST ?? '127.0.0.1', () => {
  process.stdout.write(`Rewards sandbox listening on http://${env.SANDBOX_HOST ?? '127.0.0.1'}:${port}` +
    `${flag(env.SANDBOX_CONTROL_ENABLED) ? ' (control API on /__control)' : ''}\n`);
});
server.keepAliveTimeout = 65_000;
const stop = () => server.close(() => terminate(0));
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
