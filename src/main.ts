import 'reflect-metadata';
import { loadConfigOrFail, lockDataDir, prepareRuntime } from './bootstrap';
import { closeApp, createApp } from './app.factory';
import { runMigrations } from './database/data-source';
import { terminate } from './common/terminate';

const say = (line: string) => process.stdout.write(`${line}\n`);

async function main(): Promise<void> {
  const config = loadConfigOrFail();
  const unlock = config.databaseUrl ? () => undefined : lockDataDir(prepareDataDir(config.dataDir));
  const runtime = await prepareRuntime(config, (m) => {
    if (config.logLevel === 'debug' || config.logLevel === 'trace') say(`[postgres] ${m}`);
  });
  const applied = await runMigrations(config.databaseUrl as string);
  if (applied.length) say(`Applied migrations: ${applied.join(', ')}`);

  const app = await createApp(config);
  await app.listen(config.port, '0.0.0.0');

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    say(`${signal} received: stopping`);
    const force = setTimeout(() => terminate(1), 15_000);
    force.unref();
    await closeApp(app).catch(() => undefined);
    await runtime.embedded?.stop().catch(() => undefined);
    unlock();
    terminate(0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));

  // Let the buffered start-up logs flush first, so the banner is the last thing on screen.
  await new Promise((r) => setTimeout(r, 50));
  const base = config.publicBaseUrl;
  say('');
  say(`Rewards Gateway is running at ${base}`);
  say(
    `  Database:      ${runtime.embedded ? `embedded Postgres in ${config.dataDir}/postgres` : 'DATABASE_URL'}`,
  );
  for (const env of Object.values(config.rewards)) {
    say(`  Rewards (${env.name}): ${env.baseUrl}${env.embedded ? ' (built-in sandbox)' : ''}`);
  }
  say(`  API docs:      ${base}/docs`);
  say(`  Readiness:     ${base}/health/ready`);
  say(`  Ops dashboard: ${base}/ops`);
  // Never the key itself: start-up output ends up in terminals, CI logs and log collectors. Only where it is.
  const keyFile = runtime.secrets.operatorKeyFile;
  say(
    `  Operator key:  ${keyFile ? `in ${keyFile} (generated; mode 0600)` : 'the value of OPERATOR_API_KEY'}`,
  );
  say('');
  say('Create a tenant and a key for it:');
  if (keyFile) say(`  export OPERATOR_KEY=$(cat ${keyFile})`);
  say(`  curl -s -X POST ${base}/v1/tenants -H "Authorization: Bearer $OPERATOR_KEY" \\`);
  say(`       -H 'Content-Type: application/json' -d '{"id":"acme","name":"Acme"}'`);
  say('');
}

function prepareDataDir(dir: string): string {
  require('node:fs').mkdirSync(dir, { recursive: true });
  return dir;
}

main().catch((error: unknown) => {
  process.stderr.write(
    `Rewards Gateway failed to start: ${error instanceof Error ? error.message : String(error)}\n`,
  );
  terminate(1);
});
