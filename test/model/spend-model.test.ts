/**
 * The model itself (spend-model.ts) against PROTOCOL.md by hand: window arithmetic of §13 (fixed
 * steps, calendar months and years in UTC, a start on the 31st or on 29 February), the §5 order of
 * refusals, holds of §15 at a merchant and in a wallet, replay scoped to a chain, and the narrowing
 * of §14. Then the model's window arithmetic beside the SDK's exported `windowAt`, over random points.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import fc from 'fast-check';
import { windowAt } from 'ctl';
import { SpendModel, windowIndex, windowStart, EVERIES, type Link } from './spend-model.js';

const at = (s: string) => Date.parse(s);
const iso = (t: number) => new Date(t).toISOString();
const HOUR = 3_600_000;

test('§13: fixed windows step from windowsStart; calendar ones clamp to the end of a shorter month', () => {
  const s = at('2026-01-31T10:17:00Z');
  assert.is(windowIndex('PT1H', s, at('2026-01-31T11:16:59.999Z')), 0);
  assert.is(windowIndex('PT1H', s, at('2026-01-31T11:17:00Z')), 1, 'window k covers [start+k, start+k+1)');
  assert.is(windowIndex('PT1H', s, at('2026-01-31T10:16:00Z')), -1);
  assert.is(iso(windowStart('P7D', s, 2)), '2026-02-14T10:17:00.000Z');
  assert.is(iso(windowStart('P1M', s, 1)), '2026-02-28T10:17:00.000Z', 'the 31st steps to the last day of February');
  assert.is(iso(windowStart('P1M', s, 2)), '2026-03-31T10:17:00.000Z', 'each step from the start, not from the last');
  assert.is(iso(windowStart('P1M', s, 13)), '2027-02-28T10:17:00.000Z');
  assert.is(windowIndex('P1M', s, at('2026-02-28T10:16:59Z')), 0);
  assert.is(windowIndex('P1M', s, at('2026-02-28T10:17:00Z')), 1);
  assert.is(windowIndex('P1M', s, at('2026-03-31T10:16:00Z')), 1);
  const leap = at('2024-02-29T12:00:00Z');
  assert.is(iso(windowStart('P1Y', leap, 1)), '2025-02-28T12:00:00.000Z');
  assert.is(iso(windowStart('P1Y', leap, 4)), '2028-02-29T12:00:00.000Z');
  assert.is(windowIndex('P1Y', leap, at('2026-02-28T11:59:59Z')), 1);
  assert.is(windowIndex('P1Y', leap, at('2026-02-28T12:00:00Z')), 2);
});

const T0 = at('2026-01-31T10:00:00Z');
const root = (over: Partial<Link> = {}): Link => ({
  key: 'G',
  id: 'g',
  max: 1000n,
  issuedAt: T0,
  expiresAt: T0 + 1000 * HOUR,
  windows: [{ every: 'PT1H', max: 100n, maxPayments: 2 }],
  windowsStart: T0,
  revoked: false,
  depth: 0,
  ...over,
});
const sba = (budgetId: string, leaf = 'G', max = 60n, ttl = 20 * HOUR) => ({
  leaf,
  budgetId,
  max,
  issuedAt: T0,
  expiresAt: T0 + ttl,
});
/** A verification at a verifier that keeps each clock reading in its floor. */
function verifyAt(m: SpendModel, s: ReturnType<typeof sba>, amount: bigint) {
  const v = m.verify(s, amount);
  m.floor = Math.max(m.floor, m.clock);
  return v;
}
function accept(m: SpendModel, s: ReturnType<typeof sba>, hold = false) {
  const now = Math.max(m.clock, m.floor);
  assert.equal(verifyAt(m, s, s.max), { ok: true });
  const e = { scope: s.leaf, budgetId: s.budgetId, chain: m.chain(s.leaf).map((l) => l.key) };
  m.record(m.merchant, { ...e, amount: s.max, at: now, expiresAt: s.expiresAt, hold });
  return m.merchant.entries.at(-1)!;
}

test('§5, §7, §12, §13: an SBA counts once, in the window of the floored clock; a clock set back reopens none', () => {
  const m = new SpendModel(root(), T0);
  accept(m, sba('a'));
  assert.equal(verifyAt(m, sba('a'), 60n), { ok: false, codes: ['replay'] });
  m.clock = T0 + HOUR; // the next window: the same SBA is still a replay (issue 33 item 1)
  assert.equal(verifyAt(m, sba('a'), 60n), { ok: false, codes: ['replay'] });
  m.clock = T0 + 30 * 60_000; // set back: the floor keeps the merchant in the later window
  accept(m, sba('b'));
  assert.is(m.merchant.entries[1]!.at, T0 + HOUR);
  const full = verifyAt(m, sba('c'), 60n);
  assert.equal(full, { ok: false, codes: ['window_exceeded'], resetsAt: [T0 + 2 * HOUR] });
  m.clock = T0 + 21 * HOUR;
  assert.equal(verifyAt(m, sba('d', 'G', 1n, HOUR), 1n), { ok: false, codes: ['sba_expired'] }, 'step 2 before step 4');
  m.links.get('G')!.revoked = true;
  assert.equal(verifyAt(m, sba('e', 'G', 1n, 22 * HOUR), 1n), { ok: false, codes: ['grant_revoked'] });
});

test('§15: a merchant releases an uncaptured hold at its expiry, a wallet keeps it until a receipt', () => {
  const m = new SpendModel(root({ windows: [] }), T0);
  const hold = accept(m, sba('h', 'G', 900n, HOUR), true);
  assert.equal(verifyAt(m, sba('x', 'G', 200n), 200n), { ok: false, codes: ['budget_exceeded'] });
  assert.equal(m.merchantCapture(hold, 901n), { ok: false, codes: ['capture_exceeds_hold'] });
  m.clock = T0 + HOUR;
  assert.equal(m.merchantCapture(hold, 1n), { ok: false, codes: ['hold_expired', 'replay'] });
  assert.equal(verifyAt(m, sba('y', 'G', 200n), 200n), { ok: true }, 'released at its expiry');
  const w = m.wallet('G');
  m.record(w, { ...hold, scope: 'G' });
  assert.equal(m.sign('G', 'G', 200n), { ok: false, codes: ['budget_exceeded'] }, 'the wallet keeps it past expiry');
  assert.equal(m.walletCapture(w.entries[0]!, 100n), { ok: true });
  w.entries[0]!.captured = 100n;
  assert.equal(m.sign('G', 'G', 200n), { ok: true });
  assert.equal(
    m.walletCapture(w.entries[0]!, 100n),
    { ok: false, codes: ['replay', 'hold_expired'] },
    'a second capture, past the expiry',
  );
});

test("§12, §13: a wallet's clock set back signs at the latest time its ledger counted at", () => {
  const m = new SpendModel(root(), T0);
  const w = m.wallet('G');
  m.clock = T0 + 2 * HOUR;
  assert.is(m.walletNow('G'), T0 + 2 * HOUR);
  m.record(w, {
    scope: 'G',
    budgetId: 'a',
    chain: ['G'],
    amount: 100n,
    at: T0 + 2 * HOUR,
    expiresAt: T0 + 3 * HOUR,
    hold: false,
  });
  m.clock = T0; // set back two hours: the window of 10:00 does not open again
  assert.is(m.walletNow('G'), T0 + 2 * HOUR);
  assert.equal(m.sign('G', 'G', 1n), { ok: false, codes: ['window_exceeded'], resetsAt: [T0 + 3 * HOUR] });
  assert.is(m.sbaExpiry('G', 'G', HOUR), T0 + 3 * HOUR);
});

test('§14: every link counts; replay is scoped to the chain that signed; narrowing is checked', () => {
  const m = new SpendModel(root({ windows: [] }), T0);
  const child = { id: 'd', max: 500n, issuedAt: T0, expiresAt: T0 + 10 * HOUR, windows: [], windowsStart: T0 };
  assert.equal(m.delegate('G', child, 2), { ok: true });
  m.links.set('A', { ...child, key: 'A', parent: 'G', revoked: false, depth: 1 });
  m.links.set('B', { ...child, key: 'B', parent: 'G', revoked: false, depth: 1 }); // a sibling, same id
  accept(m, sba('same', 'A', 400n));
  assert.equal(verifyAt(m, sba('same', 'B', 400n), 400n), { ok: true }, 'another chain, not a replay');
  accept(m, sba('same', 'B', 400n));
  assert.equal(
    verifyAt(m, sba('z', 'A', 300n), 300n),
    { ok: false, codes: ['budget_exceeded'] },
    'the root: 800 + 300',
  );
  assert.equal(m.delegate('A', { ...child, max: 501n }, 2), { ok: false, codes: ['delegation_invalid'] });
  assert.equal(m.delegate('A', { ...child, id: 'g' }, 2), { ok: false, codes: ['delegation_invalid'] });
  assert.equal(m.delegate('A', child, 1), { ok: false, codes: ['delegation_invalid'] }, 'deeper than maxDepth');
  const windowed = { ...child, windows: [{ every: 'P1D' as const, max: 501n }] };
  assert.equal(m.delegate('A', windowed, 2), { ok: false, codes: ['delegation_invalid'] }, 'a window above the link');
});

test("the model's windows are the SDK's windowAt, over random starts, periods and times", () => {
  const start = fc.integer({ min: Date.UTC(2020, 0, 1), max: Date.UTC(2030, 0, 1) });
  fc.assert(
    fc.property(fc.constantFrom(...EVERIES), start, fc.integer({ min: -3e9, max: 4e10 }), (every, s, d) => {
      const span = windowAt(every, s, s + d);
      const k = windowIndex(every, s, s + d);
      return (
        span.index === k && span.startsAt === windowStart(every, s, k) && span.endsAt === windowStart(every, s, k + 1)
      );
    }),
    { numRuns: 3000 },
  );
});

test.run();
