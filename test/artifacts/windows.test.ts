// Budget windows (PROTOCOL.md §13): fixed windows from `windowsStart`, calendar months and years in
// UTC, the grant's value rules, and a verifier that tracks spend refusing a window's
// `maxAmountMinor + 1`-th minor unit and `maxPayments + 1`-th payment with `resetsAt`.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import fc from 'fast-check';
import {
  CtlError,
  createMemorySpendStorage,
  createSignedSessionBudgetAuthorization,
  formatTimestamp,
  parseGrant,
  verifyCtl,
  type PolicyGrant,
} from '../../src/index.js';
import { verifyCtlEdge } from '../../src/edge.js';
import { windowAt, WINDOW_PERIODS } from '../../src/artifacts/windows.js';
import { keys, grant, T0, HOUR } from '../helpers/fixtures.js';

delete process.env['CTL_SBA_SIGNING_PUBLIC_KEY_PEM'];
const k = await keys();
const at = (iso: string) => Date.parse(iso);
const DAY = 24 * HOUR;

test('fixed periods: window k covers [start + k·every, start + (k+1)·every)', () => {
  const start = at('2026-11-22T10:00:00Z');
  assert.equal(windowAt('P1D', start, start), { index: 0, startsAt: start, endsAt: start + DAY });
  assert.equal(windowAt('P1D', start, start + DAY - 1).index, 0);
  assert.equal(windowAt('P1D', start, start + DAY).index, 1, 'the end belongs to the next window');
  assert.equal(windowAt('PT1H', start, start - 1), { index: -1, startsAt: start - HOUR, endsAt: start });
  assert.equal(windowAt('P7D', start, start + 20 * DAY).startsAt, start + 14 * DAY);
});

test(
  'months step in the calendar from the start: the 31st becomes the last day of a shorter ' +
    'month, then the 31st again',
  () => {
    const start = at('2026-01-31T08:00:00Z');
    const boundary = (t: string) => formatTimestamp(windowAt('P1M', start, at(t)).startsAt);
    assert.is(boundary('2026-02-15T00:00:00Z'), '2026-01-31T08:00:00Z');
    assert.is(boundary('2026-02-28T08:00:00Z'), '2026-02-28T08:00:00Z');
    assert.is(boundary('2026-03-30T23:59:59Z'), '2026-02-28T08:00:00Z');
    assert.is(boundary('2026-03-31T08:00:00Z'), '2026-03-31T08:00:00Z');
    assert.is(boundary('2026-04-30T08:00:00Z'), '2026-04-30T08:00:00Z');
    assert.is(boundary('2028-02-29T09:00:00Z'), '2028-02-29T08:00:00Z', 'a leap February');
    assert.is(formatTimestamp(windowAt('P1M', start, at('2026-02-28T07:59:59Z')).endsAt), '2026-02-28T08:00:00Z');
    const leap = at('2028-02-29T00:00:00Z');
    assert.is(formatTimestamp(windowAt('P1Y', leap, at('2029-03-01T00:00:00Z')).startsAt), '2029-02-28T00:00:00Z');
    assert.is(formatTimestamp(windowAt('P1Y', leap, at('2032-02-29T00:00:00Z')).startsAt), '2032-02-29T00:00:00Z');
  },
);

test('property: every time falls in exactly one window, whose bounds enclose it and abut its neighbours', () => {
  const ms = fc.integer({ min: at('2000-01-01T00:00:00Z'), max: at('2100-01-01T00:00:00Z') });
  fc.assert(
    fc.property(fc.constantFrom(...WINDOW_PERIODS), ms, ms, (every, start, t) => {
      const w = windowAt(every, start, t);
      if (!(w.startsAt <= t && t < w.endsAt)) return false;
      const next = windowAt(every, start, w.endsAt);
      const prev = windowAt(every, start, w.startsAt - 1);
      return (
        next.index === w.index + 1 &&
        next.startsAt === w.endsAt &&
        prev.index === w.index - 1 &&
        prev.endsAt === w.startsAt
      );
    }),
    { numRuns: 3000 },
  );
});

test(
  'grant value rules: 1–4 windows, each period once, none above the ceiling, windowsStart ' + 'only beside windows',
  async () => {
    const ok = await grant(k, {
      maxAmountMinor: '5000',
      windows: [
        { every: 'P1D', maxAmountMinor: '1000' },
        { every: 'P1M', maxAmountMinor: '5000', maxPayments: 30 },
      ],
    });
    assert.is(parseGrant(ok).windows!.length, 2);
    const refused = async (windows: unknown, extra: Record<string, unknown> = {}) => {
      try {
        await grant(k, { maxAmountMinor: '5000', windows: windows as never, ...extra });
        return 'signed';
      } catch (e) {
        return e instanceof CtlError ? e.code : String(e);
      }
    };
    assert.is(await refused([]), 'malformed', 'no window');
    assert.is(
      await refused(WINDOW_PERIODS.map((every) => ({ every, maxAmountMinor: '1' }))),
      'malformed',
      'five windows',
    );
    assert.is(
      await refused([
        { every: 'P1D', maxAmountMinor: '1' },
        { every: 'P1D', maxAmountMinor: '2' },
      ]),
      'malformed',
      'a period twice',
    );
    assert.is(await refused([{ every: 'P1D', maxAmountMinor: '5001' }]), 'malformed', 'above the lifetime ceiling');
    assert.is(await refused([{ every: 'P2D', maxAmountMinor: '1' }]), 'malformed', 'an unknown period');
    assert.is(await refused([{ every: 'P1D', maxAmountMinor: 1 }]), 'malformed', 'a JSON number');
    assert.is(await refused([{ every: 'P1D', maxAmountMinor: '1', rolling: true }]), 'malformed', 'an unknown member');
    assert.is(await refused(undefined, { windowsStart: formatTimestamp(T0) }), 'malformed', 'windowsStart alone');
    assert.is(
      await refused([{ every: 'P1D', maxAmountMinor: '1' }], { windowsStart: '2026-11-22T10:00:00+01:00' }),
      'malformed',
      'windowsStart with an offset',
    );
  },
);

async function windowed(windows: PolicyGrant['windows'], windowsStart?: string) {
  const g = await grant(k, {
    maxAmountMinor: '100000',
    expiresAt: formatTimestamp(T0 + 90 * DAY),
    windows,
    ...(windowsStart ? { windowsStart } : {}),
  });
  let n = 0;
  const sba = (amount: string, t: number) =>
    createSignedSessionBudgetAuthorization(
      {
        grant: g,
        sessionId: 's1',
        actorId: 'v',
        maxAmountMinor: amount,
        budgetScope: 'TRIP',
        budgetId: `b${++n}`,
        issuedAt: formatTimestamp(t - 1000),
        expiresAt: formatTimestamp(t + HOUR),
        rail: 'x402',
        merchantId: 'merchant-a',
      },
      { signingKey: k.actor.privateKeyPem, keyId: 'w', now: () => t },
    );
  return { g, sba };
}

for (const [name, verify] of [
  ['ctl', verifyCtl],
  ['ctl/edge', verifyCtlEdge],
] as const) {
  test(`${name}: a window refuses its maxAmountMinor + 1-th minor unit, and the next window accepts`, async () => {
    const { g, sba } = await windowed([{ every: 'P1D', maxAmountMinor: '1000' }], formatTimestamp(T0));
    const storage = createMemorySpendStorage();
    const o = (amount: string, t: number) => ({
      amount,
      currency: 'USD',
      merchantId: 'merchant-a',
      offline: true,
      signingKeyPem: k.authority.publicKeyPem,
      now: () => t,
      spendStorage: storage,
    });
    const pay = async (amount: string, t: number) => verify(await sba(amount, t), o(amount, t));
    assert.ok((await pay('999', T0 + HOUR)).valid);
    const over = await pay('2', T0 + 2 * HOUR);
    assert.is(!over.valid && over.error.code, 'window_exceeded');
    assert.is(!over.valid && over.error.resetsAt, formatTimestamp(T0 + DAY));
    assert.ok((await pay('1', T0 + 3 * HOUR)).valid, 'exactly the window');
    assert.ok((await pay('1000', T0 + DAY)).valid, 'the next window, at its first instant');
    assert.is(await storage.total(`grant:${g.grantId}`), 2000n, 'the lifetime total counts every window');
  });

  test(
    `${name}: a window refuses its maxPayments + 1-th payment; the lifetime ceiling still ` + 'bounds the sum',
    async () => {
      const { g, sba } = await windowed([
        { every: 'PT1H', maxAmountMinor: '100000', maxPayments: 2 },
        { every: 'P1M', maxAmountMinor: '3000' },
      ]);
      const storage = createMemorySpendStorage();
      const pay = async (amount: string, t: number) =>
        verify(await sba(amount, t), {
          amount,
          currency: 'USD',
          merchantId: 'merchant-a',
          offline: true,
          signingKeyPem: k.authority.publicKeyPem,
          now: () => t,
          spendStorage: storage,
        });
      const codes = [];
      for (const t of [T0, T0 + 1000, T0 + 2000]) codes.push((await pay('1000', t)).valid ? 'ok' : 'refused');
      assert.equal(codes, ['ok', 'ok', 'refused']);
      const hourLater = await pay('1000', T0 + HOUR);
      assert.ok(hourLater.valid, 'the next hour');
      const month = await pay('1', T0 + 2 * HOUR);
      assert.is(!month.valid && month.error.code, 'window_exceeded', 'the month is full at 3000');
      // Windows count from the grant's issuedAt when it names no windowsStart.
      assert.is(
        !month.valid && month.error.resetsAt,
        formatTimestamp(windowAt('P1M', Date.parse(g.issuedAt), T0).endsAt),
      );
    },
  );
}

test.run();
