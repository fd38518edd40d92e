/**
 * Two gateway instances on one database racing 200 payments at a budget window's edge
 * (PROTOCOL.md §13), on SQLite and PostgreSQL: neither window ever passes its amount or its
 * count, every refusal is `window_exceeded`, and the books match what the merchant was paid.
 * Slow tier: about 10 s per store on a shared machine (windows.test.ts races 50).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { sqliteDb, postgresDb, startTestGateway, startMerchant, createSession, proxy, call } from './helpers.js';
import type { Merchant, TestDb, TestGateway } from './helpers.js';
import { formatTimestamp } from '../../src/index.js';

const DAY = 86_400_000;
const T0 = Date.parse('2026-01-31T00:00:00Z');
const FAR = '2036-01-01T00:00:00Z';

interface Env {
  db: TestDb;
  gw: TestGateway;
  gw2?: TestGateway;
  m: Merchant;
  clock: { t: number };
}

const pay = (e: Env, token: string, amount: number, gw: { url: string } = e.gw) =>
  proxy(gw, token, `${e.m.url}/p${amount}`, { purpose: 'api:search' });

function suite(name: string, open: () => Promise<TestDb | undefined>) {
  let e: Env | undefined;
  test.before(async () => {
    const db = await open();
    if (!db) return;
    const clock = { t: T0 };
    const deps = { now: () => clock.t, maxSessionSeconds: 20 * 365 * 86400 };
    const gw = await startTestGateway(db, deps);
    const gw2 = await startTestGateway(db, deps, gw.ownerKey);
    const m = await startMerchant({ amount: (path) => /^\/p(\d+)/.exec(path)?.[1] ?? '100' });
    e = { db, gw, gw2, m, clock };
  });
  test.after(async () => {
    if (!e) return;
    await e.gw2?.close();
    await e.gw.close();
    await e.m.close();
    await e.db.drop();
  });

  test(`${name}: two instances racing 200 payments at a window's edge never pass it`, async () => {
    if (!e?.gw2) return;
    const edge = T0 + 50 * DAY;
    e.clock.t = edge - 1;
    const s = await createSession(e.gw, {
      budget: { amount: '100000', currency: 'USD' },
      expiresAt: FAR,
      windows: [{ every: 'PT1H', maxAmountMinor: '500', maxPayments: 40 }],
      windowsStart: formatTimestamp(T0),
    });
    const paidBefore = e.m.paid.length;
    // The clock crosses the edge halfway through: both windows are raced.
    const results = await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        if (i === 100) e!.clock.t = edge;
        return pay(e!, s.sessionToken, 10, i % 2 ? e!.gw2 : e!.gw);
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
      assert.ok(Number(w.spent) <= 500 && Number(w.payments) <= 40, JSON.stringify(w));
      assert.is(Number(w.reserved), 0);
      assert.is(Number(w.spent), 10 * Number(w.payments));
      total += Number(w.payments);
    }
    assert.is(ok, total);
    assert.is(e.m.paid.length - paidBefore, ok);
    assert.ok(ok >= 40, `${ok} paid: the first window filled`);
    const v = await call(e.gw.url, 'GET', `/sessions/${s.sessionId}`, { key: e.gw.ownerKey });
    assert.is(v.body.spentMinor, String(10 * ok));
  });
}

suite('SQLite', async () => sqliteDb());
suite('PostgreSQL', () => postgresDb('budget windows raced on PostgreSQL'));

test.run();
