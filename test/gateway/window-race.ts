/**
 * Two gateway instances on one database racing payments at a budget window's edge (PROTOCOL.md
 * §13): shared by windows.test.ts (50 payments) and windows.slow.test.ts (200). Neither window
 * passes its amount or its count, every refusal is `window_exceeded`, the books match the merchant.
 */
import * as assert from 'uvu/assert';
import { createSession, proxy, call } from './helpers.js';
import type { Merchant, TestDb, TestGateway } from './helpers.js';
import { formatTimestamp } from '../../src/index.js';

export const DAY = 86_400_000;
export const T0 = Date.parse('2026-01-31T00:00:00Z');
export const FAR = '2036-01-01T00:00:00Z';

export interface WindowEnv {
  db: TestDb;
  gw: TestGateway;
  gw2?: TestGateway;
  m: Merchant;
  clock: { t: number };
}

export const pay = (e: WindowEnv, token: string, amount: number, gw: { url: string } = e.gw) =>
  proxy(gw, token, `${e.m.url}/p${amount}`, { purpose: 'api:search' });

/** `payments` of 10 each, half on each instance, the clock crossing an hour window's edge halfway. */
export async function raceAtWindowEdge(
  e: WindowEnv & { gw2: TestGateway },
  o: { payments: number; maxAmountMinor: number; maxPayments: number },
): Promise<void> {
  const edge = T0 + 50 * DAY;
  e.clock.t = edge - 1;
  const s = await createSession(e.gw, {
    budget: { amount: '100000', currency: 'USD' },
    expiresAt: FAR,
    windows: [{ every: 'PT1H', maxAmountMinor: String(o.maxAmountMinor), maxPayments: o.maxPayments }],
    windowsStart: formatTimestamp(T0),
  });
  const paidBefore = e.m.paid.length;
  // The clock crosses the edge halfway through: both windows are raced.
  const results = await Promise.all(
    Array.from({ length: o.payments }, async (_, i) => {
      if (i === o.payments / 2) e.clock.t = edge;
      return pay(e, s.sessionToken, 10, i % 2 ? e.gw2 : e.gw);
    }),
  );
  const ok = results.filter((r) => r.status === 200).length;
  assert.ok(
    results.every((r) => r.status === 200 || r.body.error.code === 'window_exceeded'),
    results.map((r) => r.status).join(','),
  );
  const rows = await e.gw.db.all(
    `SELECT starts_at, spent, reserved, payments FROM gw_session_windows WHERE session_id = ? ORDER BY starts_at`,
    [s.sessionId],
  );
  let total = 0;
  for (const w of rows) {
    assert.ok(Number(w.spent) <= o.maxAmountMinor && Number(w.payments) <= o.maxPayments, JSON.stringify(w));
    assert.is(Number(w.reserved), 0);
    assert.is(Number(w.spent), 10 * Number(w.payments));
    total += Number(w.payments);
  }
  assert.is(ok, total);
  assert.is(e.m.paid.length - paidBefore, ok);
  assert.ok(ok >= o.maxPayments, `${ok} paid: the first window filled`);
  const v = await call(e.gw.url, 'GET', `/sessions/${s.sessionId}`, { key: e.gw.ownerKey });
  assert.is(v.body.spentMinor, String(10 * ok));
}
