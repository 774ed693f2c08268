import { request as httpRequest } from 'node:http';

export interface RawResponse {
  status: number;
  requestId?: string;
  text: string;
}

/**
 * The exact bytes over plain HTTP, `Content-Length` set from them (a client library would re-encode a Buffer, a
 * broken string or a charset).
 */
export function rawRequest(
  baseUrl: string,
  method: string,
  path: string,
  body: Buffer | string,
  headers: Record<string, string> = {},
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const url = new URL(`${baseUrl}${path}`);
    const bytes = typeof body === 'string' ? Buffer.from(body) : body;
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method,
        headers: { 'Content-Type': 'application/json', 'Content-Length': String(bytes.length), ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            requestId: res.headers['x-request-id'] as string | undefined,
            text: Buffer.concat(chunks).toString('utf8'),
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(bytes);
  });
}
