import { isForbiddenAddress, isForbiddenTargetError, resolveChecked } from './target-guard';
import { retryDelayMs } from './webhook-events';

describe('webhook target guard', () => {
  it.each([
    '127.0.0.1',
    '127.255.255.254',
    '0.0.0.0',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '100.127.255.255',
    '224.0.0.1',
    '239.255.255.250',
    '255.255.255.255',
    '::',
    '::1',
    'fc00::1',
    'fd12:3456::1',
    'fe80::1',
    'ff02::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:10.0.0.1',
    '64:ff9b::a9fe:a9fe',
  ])('refuses %s', (address) => {
    expect(isForbiddenAddress(address)).toBe(true);
  });

  it.each([
    '8.8.8.8',
    '1.1.1.1',
    '100.63.255.255',
    '100.128.0.0',
    '172.32.0.1',
    '2606:4700::1111',
    '::ffff:8.8.8.8',
  ])('allows %s', (address) => {
    expect(isForbiddenAddress(address)).toBe(false);
  });

  const refused = (p: Promise<unknown>) =>
    p.then(
      () => false,
      (e: unknown) => isForbiddenTargetError(e),
    );

  it('refuses localhost by name and by resolution, unless private targets are allowed', async () => {
    expect(await refused(resolveChecked('localhost', false))).toBe(true);
    expect(await refused(resolveChecked('api.localhost', false))).toBe(true);
    expect(await refused(resolveChecked('127.0.0.1', false))).toBe(true);
    expect(await refused(resolveChecked('::1', false))).toBe(true);
    await expect(resolveChecked('127.0.0.1', true)).resolves.toEqual([{ address: '127.0.0.1', family: 4 }]);
    const local = await resolveChecked('localhost', true);
    expect(local.length).toBeGreaterThan(0);
  });

  it('backs off on the schedule, the last wait repeating, with ±10 % jitter', () => {
    const schedule = [5_000, 30_000, 120_000];
    expect(retryDelayMs(schedule, 1, () => 0.5)).toBe(5_000);
    expect(retryDelayMs(schedule, 2, () => 0.5)).toBe(30_000);
    expect(retryDelayMs(schedule, 3, () => 0.5)).toBe(120_000);
    expect(retryDelayMs(schedule, 9, () => 0.5)).toBe(120_000);
    expect(retryDelayMs(schedule, 1, () => 0)).toBe(4_500);
    expect(retryDelayMs(schedule, 1, () => 1)).toBe(5_500);
  });
});
