import 'reflect-metadata';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { Runtime } from './bootstrap';
import { loadSettingsOrFail, lockDataDir, prepareRuntime } from './bootstrap';
import type { AppConfig } from './config/app-config';
import { terminate } from './common/terminate';
import {
  CREATE_API_KEY,
  CREATE_TENANT,
  FIRST_HOUR_TENANT,
  SEND_REWARD,
  connectSession,
  variables,
} from './ops/first-steps';
// Nest and the app are loaded in start(), after the signal handlers are in place (loading takes a second).
type AppFactory = typeof import('./app.factory');

const say = (line: string) => process.stdout.write(`${line}\n`);

/** Every interface: the gateway is reached through PUBLIC_BASE_URL, which may be a container's published port. */
const LISTEN_HOST = '0.0.0.0';
/** A stop that takes longer than this (a request that never ends) ends the process anyway, with exit code 1. */
const STOP_TIMEOUT_MS = 15_000;

/** What has been started so far: a signal or a failed start stops exactly that, the app before its database. */
const started: {
  unlock?: () => void;
  runtime?: Runtime;
  factory?: AppFactory;
  app?: NestFastifyApplication;
} = {};
let stopping = false;

async function start(): Promise<void> {
  const settings = loadSettingsOrFail();
  // Before anything else runs: the first traced work is the app's. Unset, the SDK is not even loaded.
  if (settings.tracing) await (await import('./common/tracing')).startTracing(settings.tracing);
  started.unlock = settings.database.url ? undefined : lockDataDir(settings.dataDir);
  started.runtime = await prepareRuntime(settings, (m) => {
    if (settings.logLevel === 'debug' || settings.logLevel === 'trace') say(`[postgres] ${m}`);
  });
  const { config } = started.runtime;
  // A signal during start-up lets the step under way finish, then stops what exists (stop() waits for this).
  if (stopping) return;
  const { runMigrations } = await import('./database/migrator');
  const applied = await runMigrations(config.database.url);
  if (applied.length)
    say(
      `Applied ${applied.length} migration${applied.length === 1 ? '' : 's'} (the last: ${applied.at(-1)})`,
    );
  if (stopping) return;
  const factory = (started.factory = await import('./app.factory'));
  const app = (started.app = await factory.createApp(config));
  if (stopping) return;
  await listen(app, config.port);

  // Let the buffered start-up logs flush first, so the banner is the last thing on screen.
  await new Promise((r) => setTimeout(r, 50));
  if (stopping) return;
  const address = (app.getHttpServer() as Server).address() as AddressInfo;
  const progress = await quickStartProgress(app);
  if (stopping) return;
  for (const line of banner(config, started.runtime, address, progress)) say(line);
}

type QuickStartProgress = 'no-tenant' | 'not-connected' | 'connected';

/** How far the README's first hour has got on this database, so a restart shows the next step, not the first. */
async function quickStartProgress(app: NestFastifyApplication): Promise<QuickStartProgress> {
  const { ConnectionsService } = await import('./connections/connections.service');
  try {
    const connection = await app.get(ConnectionsService).getConnection(FIRST_HOUR_TENANT);
    return connection.status === 'active' || connection.status === 'error' ? 'connected' : 'not-connected';
  } catch (error) {
    return (error as { code?: string }).code === 'connection_not_found' ? 'not-connected' : 'no-tenant';
  }
}

async function listen(app: NestFastifyApplication, port: number): Promise<void> {
  try {
    await app.listen(port, LISTEN_HOST);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE')
      throw new Error(`port ${port} is already in use (another gateway?): stop that process or set PORT`);
    if (code === 'EACCES') throw new Error(`port ${port} needs privileges: set PORT to 1024 or above`);
    throw error;
  }
}

/**
 * The start-up banner: where everything is, then the README's next step of its first hour with this gateway's
 * addresses — the first steps on a new database, the connect link once tenant acme exists, the send once it is
 * connected. Labels in one column.
 */
function banner(
  config: AppConfig,
  runtime: Runtime,
  address: AddressInfo,
  progress: QuickStartProgress,
): string[] {
  const base = config.publicBaseUrl;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const local = `http://localhost:${address.port}`;
  const row = (label: string, value: string) => `  ${`${label}:`.padEnd(15)}${value}`;
  const lines = [''];
  if (sameLocalOrigin(base, address.port)) {
    lines.push(`Rewards Gateway is running at ${base}`);
  } else {
    // PUBLIC_BASE_URL is where browsers and the rewards service reach the gateway (a proxy, a published port);
    // the socket is where this process listens. Both, so neither is a surprise.
    lines.push(`Rewards Gateway is running at ${base} (PUBLIC_BASE_URL)`);
    lines.push(row('Listening on', `${host}:${address.port} (${local} from this machine)`));
  }
  lines.push(
    row('Database', runtime.embedded ? `embedded Postgres in ${config.dataDir}/postgres` : 'DATABASE_URL'),
  );
  for (const env of Object.values(config.rewards)) {
    lines.push(
      row('Rewards', `${env.baseUrl} (${env.embedded ? 'sandbox: the built-in emulator' : env.name})`),
    );
  }
  lines.push(row('API docs', `${base}/docs`));
  lines.push(row('Readiness', `${base}/health/ready`));
  lines.push(row('Ops dashboard', `${base}/ops (any user name, the operator key as password)`));
  // Never the key itself: start-up output ends up in terminals, CI logs and log collectors. Only where it is.
  const keyFile = runtime.secrets.operatorKeyFile;
  lines.push(
    row('Operator key', keyFile ? `in ${keyFile} (generated; mode 0600)` : 'the value of OPERATOR_API_KEY'),
  );
  const indent = (commands: string[]) => commands.map((c) => `  ${c}`);
  const exports = indent(variables(base, keyFile));
  lines.push('');
  if (progress === 'no-tenant') {
    lines.push(
      'First steps: a tenant, an API key for its own service, and a link to connect its rewards account:',
    );
    lines.push(...exports, ...indent([...CREATE_TENANT, ...CREATE_API_KEY, ...connectSession('API_KEY')]));
    lines.push('Open the connect_url it answers in a browser and approve.');
  } else if (progress === 'not-connected') {
    lines.push(
      `Tenant ${FIRST_HOUR_TENANT} has no rewards connection: open the connect_url this answers in a browser and approve:`,
    );
    lines.push(...exports, ...indent(connectSession('OPERATOR_KEY')));
  } else {
    lines.push(
      `Tenant ${FIRST_HOUR_TENANT} is connected: send a reward with a key of its own (a new one: keys are shown once):`,
    );
    lines.push(...exports, ...indent([...CREATE_API_KEY, ...SEND_REWARD]));
  }
  lines.push(`The whole first hour: README.md, "The first hour" (a summary at ${base}/).`);
  lines.push('');
  lines.push('Stop with Ctrl-C.');
  return lines;
}

/** True when PUBLIC_BASE_URL is this machine's plain-http address of the bound port (localhost, 127.0.0.1, [::1]). */
function sameLocalOrigin(publicBaseUrl: string, port: number): boolean {
  const url = new URL(publicBaseUrl);
  const urlPort = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  return (
    url.protocol === 'http:' && urlPort === port && ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname)
  );
}

/** Closes what was started, in order; never throws (a stop or a failed start must still end the process). */
async function release(): Promise<void> {
  if (started.app && started.factory) await started.factory.closeApp(started.app).catch(() => undefined);
  await started.runtime?.embedded?.stop().catch(() => undefined);
  // The spans still buffered go out last (a no-op when tracing is off).
  await (await import('./common/tracing')).stopTracing();
  started.unlock?.();
}

/**
 * SIGINT (Ctrl-C) and SIGTERM: one line, then a clean stop — the app (the sandbox's last write, requests under way)
 * before the embedded Postgres — and exit code 0. A second signal while stopping changes nothing.
 */
async function stop(signal: NodeJS.Signals): Promise<void> {
  if (stopping) return;
  stopping = true;
  say(`${signal} received: stopping`);
  const force = setTimeout(() => {
    process.stderr.write(`Rewards Gateway did not stop within ${STOP_TIMEOUT_MS / 1000} s; exiting\n`);
    terminate(1);
  }, STOP_TIMEOUT_MS);
  force.unref();
  await starting.catch(() => undefined);
  await release();
  terminate(0);
}

const starting = start();
// From the first moment: a Ctrl-C during start-up (the first initdb takes seconds) also stops cleanly.
process.on('SIGINT', () => void stop('SIGINT'));
process.on('SIGTERM', () => void stop('SIGTERM'));
starting.catch(async (error: unknown) => {
  if (stopping) return; // stop() ends the process
  process.stderr.write(
    `Rewards Gateway failed to start: ${error instanceof Error ? error.message : String(error)}\n`,
  );
  await release();
  terminate(1);
});
