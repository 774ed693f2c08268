/**
 * A reference point for `npm run bench`: the least any proxy must do — read the request, forward it upstream on a
 * keep-alive connection, write the answer back — with no framework, no validation, no database. Its throughput on
 * the same machine is the ceiling for any gateway whose process shares the cores with its upstream.
 */
import { createServer } from 'node:http';
import { Agent, request } from 'undici';

const upstream = process.env.UPSTREAM_URL as string;
const agent = new Agent({ keepAliveTimeout: 4_000, connections: 64 });

createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    request(`${upstream}${req.url}`, {
      method: req.method as 'POST',
      headers: { authorization: req.headers.authorization ?? '', 'content-type': 'application/json' },
      body: Buffer.concat(chunks),
      dispatcher: agent,
    })
      .then(async (up) => {
        const body = await up.body.text();
        res.writeHead(up.statusCode, { 'content-type': 'application/json' }).end(body);
      })
      .catch(() => res.writeHead(502).end());
  });
}).listen(Number(process.env.PORT), '127.0.0.1');
