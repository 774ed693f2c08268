import { createHmac } from 'node:crypto';
import { parseSignature, signatureMatches, signedForms } from './webhook-signature';

const KEY = 'a'.repeat(64);
const signer = { hmac: (data: string | Buffer) => createHmac('sha256', KEY).update(data).digest() };
const sign = (body: string, key = KEY) => `sha256=${createHmac('sha256', key).update(body).digest('hex')}`;

describe('delivery webhook signatures', () => {
  const event = {
    event: 'REWARDS.DELIVERY.SUCCEEDED',
    uuid: '5ccc7bb1-7659-4e23-a407-77d8cd9c62f5',
    created_utc: '2021-04-06T20:05:01.037-04:00',
    payload: { resource: { id: '2V3PCCL7QXDA', type: 'rewards' }, meta: {} },
  };
  const compact = JSON.stringify(event);
  const pretty = JSON.stringify(event, null, 2);

  it('parses <algorithm>=<hex> (algorithm ignored, as the sample does) and refuses anything else', () => {
    const hex = createHmac('sha256', KEY).update(compact).digest('hex');
    expect(parseSignature(`sha256=${hex}`)?.toString('hex')).toBe(hex);
    expect(parseSignature(`SHA256=${hex.toUpperCase()}`)?.toString('hex')).toBe(hex);
    expect(parseSignature(hex)?.toString('hex')).toBe(hex);
    for (const bad of [
      undefined,
      '',
      'sha256=',
      `sha256=${hex.slice(1)}`,
      `sha256=${hex}00`,
      `sha256=${'z'.repeat(64)}`,
      `sha256=${hex}, sha256=${hex}`,
      [`sha256=${hex}`],
    ])
      expect(parseSignature(bad)).toBeNull();
  });

  it('accepts a signature over the raw body', () => {
    const raw = Buffer.from(pretty);
    const provided = parseSignature(sign(pretty)) as Buffer;
    expect(signatureMatches(provided, signer, signedForms(raw, JSON.parse(pretty)))).toBe(true);
  });

  it('accepts a signature over the JSON as re-serialised (JSON.stringify(JSON.parse(raw)))', () => {
    const raw = Buffer.from(pretty);
    const forms = signedForms(raw, JSON.parse(pretty));
    expect(forms.map((f) => f.toString())).toEqual([pretty, compact]);
    expect(signatureMatches(parseSignature(sign(compact)) as Buffer, signer, forms)).toBe(true);
  });

  it('checks a compact body once, and refuses another key or another body', () => {
    const raw = Buffer.from(compact);
    expect(signedForms(raw, event)).toHaveLength(1);
    expect(signatureMatches(parseSignature(sign(compact, 'b'.repeat(64))) as Buffer, signer, [raw])).toBe(
      false,
    );
    expect(signatureMatches(parseSignature(sign(`${compact} `)) as Buffer, signer, [raw])).toBe(false);
  });

  it('falls back to the raw form when the value is too deep to serialise again', () => {
    const raw = Buffer.from('[]');
    const deep: unknown[] = [];
    let at = deep;
    for (let i = 0; i < 200_000; i++) {
      const next: unknown[] = [];
      at.push(next);
      at = next;
    }
    expect(signedForms(raw, deep)).toEqual([raw]);
  });
});
