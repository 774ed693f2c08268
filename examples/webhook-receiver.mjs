// A tenant's webhook endpoint, to try the gateway's webhooks out: it checks each event's signature (Standard
// Webhooks: HMAC-SHA256 over "<webhook-id>.<webhook-timestamp>.<raw body>", with the endpoint's secret, at most
// 5 minutes old) and prints one line per event. Usage:
//   WEBHOOK_SECRET=whsec_… node examples/webhook-receiver.mjs [port]     (default port 4000; path /hooks)
import { createServer } from 'node:http';
import { Webhook } from 'standardwebhooks';

const port = Number(process.argv[2] ?? 4000);
const secret = process.env.WEBHOOK_SECRET ?? '';
if (!secret.startsWith('whsec_')) {
  console.error('Set WEBHOOK_SECRET to the secret of the webhook endpoint (whsec_…), shown when it was created.');
  process.exit(1);
}
const webhook = new Webhook(secret);

createServer((req, res) => {
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    // Verify the raw bytes as they arrived: a parsed and re-serialised body would not match the signature.
    const raw = Buffer.concat(chunks).toString('utf8');
    try {
      const event = webhook.verify(raw, req.headers);
      const about = event.data.external_id ?? event.data.dispatch_id ?? event.data.connection_id ?? '';
      console.log(`webhook: ${event.type} ${about} (signature verified, webhook-id ${req.headers['webhook-id']})`);
      res.writeHead(204).end(); // any 2xx: delivered; deduplicate on webhook-id, retries reuse it
    } catch (error) {
      console.log(`webhook: REJECTED (${error.message})`);
      res.writeHead(400).end();
    }
  });
}).listen(port, () => console.log(`webhook receiver: http://localhost:${port}/hooks`));
