import 'reflect-metadata';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { NestExpressApplication } from '@nestjs/platform-express';
import type { Runtime } from './bootstrap';
import { loadConfigOrFail, lockDataDir, prepareRuntime } from './bootstrap';
import type { AppConfig } from './config/app-config';
import { terminate } from './common/terminate';
// Nest, TypeORM and the app are loaded in start(), after the signal handlers are in place (loading takes a second).
type AppFactory = typeof import('./app.factory');

const say = (line: string) => process.stdout.write(`${line}\n`);

/** Every interface: the gateway is reached through PUBLIC_BASE_URL, which may be a container's published port. */
const LISTEN_HOST = '0.0.0.0';
/** A stop that takes longer than this (a request that never ends) ends the process anyway, with exit code 1. */
const STOP_TIMEOUT_MS = 15_000;

/**
 * The tenant of the README's quick start, with the page its admins come back to after connecting: a connect session
 * may only name a return_url on this list, so the README's next step (a connect session for this URL) works as is.
 */
const QUICK_START_RETURN_URL = 'https://platform.example.com/settings/rewards';

/** What has been started so far: a signal or a failed start stops exactly that, the app before its database. */
const started: {
  unlock?: () => void;
  runtime?: Runtime;
  factory?: AppFactory;
  app?: NestExpressApplication;
} = {};
let stopping = false;

async function start(): Promise<void> {
  const config = loadConfigOrFail();
  started.unlock = config.databaseUrl ? undefined : lockDataDir(prepareDataDir(config.dataDir));
  started.runtime = await prepareRuntime(config, (m) => {
    if (config.logLevel === 'debug' || config.logLevel === 'trace') say(`[postgres] ${m}`);
  });
  // A signal during start-up lets the step under way finish, then stops what exists (stop() waits for this).
  if (stopping) return;
  const { runMigrations } = await import('./database/data-source');
  const applied = await runMigrations(config.databaseUrl as string);
  if (applied.length) say(`Applied migrations: ${applied.join(', ')}`);
  if (stopping) return;
  const factory = (started.factory = await import('./app.factory'));
  const app = (started.app = await factory.createApp(config));
  if (stopping) return;
  await listen(app, config.port);

  // Let the buffered start-up logs flush first, so the banner is the last thing on screen.
  await new Promise((r) => setTimeout(r, 50));
  if (stopping) return;
  const address = (app.getHttpServer() as Server).address() as AddressInfo;
  for (const line of banner(config, started.runtime, address)) say(line);
}

async function listen(app: NestExpressApplication, port: number): Promise<void> {
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

/** The start-up banner: where everything is, and the README's first steps with this gateway's addresses. */
function banner(config: AppConfig, runtime: Runtime, address: AddressInfo): string[] {
  const base = config.publicBaseUrl;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const local = `http://localhost:${address.port}`;
  const lines = [''];
  if (sameLocalOrigin(base, address.port)) {
    lines.push(`Rewards Gateway is running at ${base}`);
  } else {
    // PUBLIC_BASE_URL is where browsers and the rewards service reach the gateway (a proxy, a published port);
    // the socket is where this process listens. Both, so neither is a surprise.
    lines.push(`Rewards Gateway is running at ${base} (PUBLIC_BASE_URL)`);
    lines.push(`  Listening on:  ${host}:${address.port} (${local} from this machine)`);
  }
  lines.push(
    `  Database:      ${runtime.embedded ? `embedded Postgres in ${config.dataDir}/postgres` : 'DATABASE_URL'}`,
  );
  for (const env of Object.values(config.rewards)) {
    lines.push(`  Rewards (${env.name}): ${env.baseUrl}${env.embedded ? ' (built-in sandbox)' : ''}`);
  }
  lines.push(`  API docs:      ${base}/docs`);
  lines.push(`  Readiness:     ${base}/health/ready`);
  lines.push(`  Ops dashboard: ${base}/ops (any user name, the operator key as password)`);
  // Never the key itself: start-up output ends up in terminals, CI logs and log collectors. Only where it is.
  const keyFile = runtime.secrets.operatorKeyFile;
  lines.push(
    `  Operator key:  ${keyFile ? `in ${keyFile} (generated; mode 0600)` : 'the value of OPERATOR_API_KEY'}`,
  );
  const auth = `-H "Authorization: Bearer $OPERATOR_KEY"`;
  const json = `-H 'Content-Type: application/json'`;
  lines.push('');
  lines.push('Create a tenant and a key for it:');
  lines.push(`  export GW=${base}`);
  lines.push(
    keyFile
      ? `  export OPERATOR_KEY=$(cat ${keyFile})`
      : `  export OPERATOR_KEY=...   # the value of OPERATOR_API_KEY`,
  );
  // As the README has them, so its later steps (which use $GW and $OPERATOR_KEY) follow on.
  lines.push(`  curl -s -X POST $GW/v1/tenants ${auth} \\`);
  lines.push(`       ${json} \\`);
  lines.push(`       -d '{"id":"acme","name":"Acme Corp","return_urls":["${QUICK_START_RETURN_URL}"]}'`);
  lines.push(`  curl -s -X POST $GW/v1/tenants/acme/api-keys ${auth} \\`);
  lines.push(`       ${json} -d '{"name":"payments-service"}'`);
  lines.push(
    'Then connect its rewards account: open the connect_url this answers in a browser, and approve:',
  );
  lines.push(`  curl -s -X POST $GW/v1/tenants/acme/connect-sessions ${auth} \\`);
  lines.push(`       ${json} -d '{"return_url":"${QUICK_START_RETURN_URL}"}'`);
  lines.push(`Sending a reward and more: README.md, "Quick start" (a summary at ${base}/).`);
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

function prepareDataDir(dir: string): string {
  require('node:fs').mkdirSync(dir, { recursive: true });
  return dir;
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
