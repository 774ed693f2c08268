import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One span as an OTLP receiver sees it, ids in hex. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP's enum: 1 internal, 2 server, 3 client. */
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, unknown>;
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  statusCode: number;
  resource: Record<string, unknown>;
}

export interface OtlpReceiver {
  url: string;
  /** Every export request: its path and content type. */
  requests: { path: string; contentType: string }[];
  spans: ReceivedSpan[];
  close(): Promise<void>;
}

/**
 * A local OTLP/HTTP trace receiver (what a collector does at `/v1/traces`): accepts protobuf (the exporters' default)
 * and JSON, decodes every span, answers 200 with an empty ExportTraceServiceResponse.
 */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const receiver: Omit<OtlpReceiver, 'url' | 'close'> = { requests: [], spans: [] };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const contentType = String(req.headers['content-type'] ?? '');
      receiver.requests.push({ path: req.url ?? '', contentType });
      const body = Buffer.concat(chunks);
      try {
        if (req.url === '/v1/traces')
          receiver.spans.push(
            ...(contentType.includes('json')
              ? fromJson(JSON.parse(body.toString('utf8')))
              : fromProtobuf(body)),
          );
      } catch (error) {
        res.writeHead(400).end(String(error));
        return;
      }
      res.writeHead(200, { 'Content-Type': contentType || 'application/x-protobuf' });
      res.end(contentType.includes('json') ? '{}' : '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    ...receiver,
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// --- protobuf: the few messages of opentelemetry/proto/collector/trace/v1 a receiver needs, on the wire format ---

type Field = { no: number; wire: number; value: bigint | Buffer };

function fields(buf: Buffer): Field[] {
  const out: Field[] = [];
  let at = 0;
  const varint = (): bigint => {
    let result = 0n;
    for (let shift = 0n; ; shift += 7n) {
      const byte = buf[at++];
      result |= BigInt(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return result;
    }
  };
  while (at < buf.length) {
    const tag = Number(varint());
    const no = tag >> 3;
    const wire = tag & 7;
    if (wire === 0) out.push({ no, wire, value: varint() });
    else if (wire === 1) {
      out.push({ no, wire, value: buf.readBigUInt64LE(at) });
      at += 8;
    } else if (wire === 2) {
      const len = Number(varint());
      out.push({ no, wire, value: buf.subarray(at, at + len) });
      at += len;
    } else if (wire === 5) {
      out.push({ no, wire, value: BigInt(buf.readUInt32LE(at)) });
      at += 4;
    } else throw new Error(`unsupported wire type ${wire}`);
  }
  return out;
}

const bytes = (f: Field[], no: number): Buffer[] =>
  f.filter((x) => x.no === no && x.wire === 2).map((x) => x.value as Buffer);
const num = (f: Field[], no: number): bigint => (f.find((x) => x.no === no)?.value as bigint) ?? 0n;

function anyValue(buf: Buffer): unknown {
  const f = fields(buf)[0];
  if (!f) return null;
  switch (f.no) {
    case 1:
      return (f.value as Buffer).toString('utf8');
    case 2:
      return f.value !== 0n;
    case 3:
      return Number(BigInt.asIntN(64, f.value as bigint));
    case 4: {
      const b = Buffer.alloc(8);
      b.writeBigUInt64LE(f.value as bigint);
      return b.readDoubleLE();
    }
    case 5:
      return bytes(fields(f.value as Buffer), 1).map(anyValue);
    default:
      return (f.value as Buffer).toString('hex');
  }
}

function keyValues(list: Buffer[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const kv of list) {
    const f = fields(kv);
    const value = bytes(f, 2)[0];
    out[bytes(f, 1)[0]?.toString('utf8') ?? ''] = value ? anyValue(value) : null;
  }
  return out;
}

function fromProtobuf(body: Buffer): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of bytes(fields(body), 1)) {
    const rs = fields(resourceSpans);
    const resourceMsg = bytes(rs, 1)[0];
    const resource = resourceMsg ? keyValues(bytes(fields(resourceMsg), 1)) : {};
    for (const scopeSpans of bytes(rs, 2)) {
      for (const spanMsg of bytes(fields(scopeSpans), 2)) {
        const s = fields(spanMsg);
        const status = bytes(s, 15)[0];
        spans.push({
          traceId: bytes(s, 1)[0]?.toString('hex') ?? '',
          spanId: bytes(s, 2)[0]?.toString('hex') ?? '',
          parentSpanId: bytes(s, 4)[0]?.toString('hex') ?? '',
          name: bytes(s, 5)[0]?.toString('utf8') ?? '',
          kind: Number(num(s, 6)),
          startNs: num(s, 7),
          endNs: num(s, 8),
          attributes: keyValues(bytes(s, 9)),
          statusCode: status ? Number(num(fields(status), 3)) : 0,
          resource,
        });
      }
    }
  }
  return spans;
}

// --- JSON (OTEL_EXPORTER_OTLP_PROTOCOL=http/json): ids in hex, AnyValue as {stringValue|intValue|…} ---

interface JsonKeyValue {
  key: string;
  value: Record<string, unknown>;
}

function jsonValue(v: Record<string, unknown> | undefined): unknown {
  if (!v) return null;
  if ('stringValue' in v) return v.stringValue;
  if ('boolValue' in v) return v.boolValue;
  if ('intValue' in v) return Number(v.intValue);
  if ('doubleValue' in v) return v.doubleValue;
  if ('arrayValue' in v)
    return ((v.arrayValue as { values?: Record<string, unknown>[] }).values ?? []).map(jsonValue);
  return JSON.stringify(v);
}

const jsonAttributes = (list: JsonKeyValue[] = []) =>
  Object.fromEntries(list.map((kv) => [kv.key, jsonValue(kv.value)]));

// eslint-disable-next-line @typescript-eslint/no-explicit-any
function fromJson(body: any): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const rs of body.resourceSpans ?? []) {
    const resource = jsonAttributes(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? [])
      for (const s of ss.spans ?? [])
        spans.push({
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId ?? '',
          name: s.name,
          kind: s.kind,
          startNs: BigInt(s.startTimeUnixNano),
          endNs: BigInt(s.endTimeUnixNano),
          attributes: jsonAttributes(s.attributes),
          statusCode: s.status?.code ?? 0,
          resource,
        });
  }
  return spans;
}
