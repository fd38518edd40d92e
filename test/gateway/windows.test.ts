/**
 * Budget windows on gateway sessions (PROTOCOL.md §13), on SQLite and on PostgreSQL: a window
 * refuses its maxAmountMinor+1-th minor unit and its maxPayments+1-th payment with
 * `window_exceeded`, `resetsAt` and Retry-After; the next window accepts; a release goes back to a
 * window that has ended; a month window from the 31st; a soft limit pauses one window; two
 * instances racing 200 payments at a window's edge never pass it.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  sqliteDb,
  postgresDb,
  startTestGateway,
  startMerchant,
  createSession,
  proxy,
  call,
  type Merchant,
  type TestDb,
  type TestGateway,
} from './helpers.js';
import { reserve, release, commit } from '../../gateway/payments/store/payments.js';
import { raceAtWindowEdge } from './window-race.js';
import { formatTimestamp } from '../../src/index.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const T0 = Date.parse('2026-01-31T00:00:00Z');
const FAR = '2036-01-01T00:00:00Z';

interface Env {
  db: TestDb;
  gw: TestGateway;
  gw2?: TestGateway;
  m: Merchant;
  clock: { t: number };
}

/** `/p<amount>` asks `<amount>` minor units. */
const merchant = () => startMerchant({ amount: (path) => /^\/p(\d+)/.exec(path)?.[1] ?? '100' });

async function start(db: TestDb, two = false): Promise<Env> {
  const clock = { t: T0 };
  const deps = { now: () => clock.t, maxSessionSeconds: 20 * 365 * 86400 };
  const gw = await startTestGateway(db, deps);
  const gw2 = two ? await startTestGateway(db, deps, gw.ownerKey) : undefined;
  return { db, gw, gw2, m: await merchant(), clock };
}

async function stop(e: Env) {
  await e.gw2?.close();
  await e.gw.close();
  await e.m.close();
  await e.db.drop();
}

const pay = (e: Env, token: string, amount: number, gw: { url: string } = e.gw) =>
  proxy(gw, token, `${e.m.url}/p${amount}`, { purpose: 'api:search' });

function suite(name: string, open: () => Promise<TestDb | undefined>) {
  let e: Env | undefined;
  test.before(async () => {
    const db = await open();
    if (db) e = await start(db, true);
  });
  test.after(async () => {
    if (e) await stop(e);
  });

  test(`${name}: a window refuses its maxAmountMinor+1-th unit, then the next window accepts`, async () => {
    if (!e) return;
    e.clock.t = T0 + 10 * DAY;
    const s = await createSession(e.gw, {
      budget: { amount: '5000', currency: 'USD' },
      expiresAt: FAR,
      windows: [{ every: 'P1D', maxAmountMinor: '1000' }],
      windowsStart: formatTimestamp(T0),
    });
    assert.is((await pay(e, s.sessionToken, 999)).status, 200);
    const seen = e.m.paid.length;
    const r = await pay(e, s.sessionToken, 2);
    assert.is(r.status, 402);
    assert.is(r.body.error.code, 'window_exceeded');
    assert.is(r.body.error.resetsAt, formatTimestamp(T0 + 11 * DAY));
    assert.ok(Number(r.headers.get('retry-after')) >= 1, 'Retry-After');
    assert.is(e.m.paid.length, seen, 'nothing paid');
    assert.is((await pay(e, s.sessionToken, 1)).status, 200, 'the last unit fits');
    const v = await call(e.gw.url, 'GET', `/sessions/${s.sessionId}`, { key: e.gw.ownerKey });
    assert.is(v.body.spentMinor, '1000');
    assert.equal(v.body.windows[0], {
      every: 'P1D',
      maxAmountMinor: '1000',
      spentMinor: '1000',
      reservedMinor: '0',
      remainingMinor: '0',
      payments: 2,
      startedAt: formatTimestamp(T0 + 10 * DAY),
      resetsAt: formatTimestamp(T0 + 11 * DAY),
    });
    assert.ok(e.gw.events.some((x) => x.type === 'window.exhausted' && x.data.sessionId === s.sessionId));
    e.clock.t = T0 + 11 * DAY - 1;
    assert.is((await pay(e, s.sessionToken, 1)).body.error.code, 'window_exceeded', 'still the same window');
    e.clock.t = T0 + 11 * DAY;
    assert.is((await pay(e, s.sessionToken, 1000)).status, 200, 'the next window accepts');
    const a = await call(e.gw.url, 'GET', '/session', { key: s.sessionToken });
    assert.is(a.body.windows[0].spentMinor, '1000');
    assert.is(a.body.spentMinor, '2000');
  });

  test(`${name}: a window refuses its maxPayments+1-th payment; lifetime still bounds the windows`, async () => {
    if (!e) return;
    e.clock.t = T0 + 20 * DAY;
    const s = await createSession(e.gw, {
      budget: { amount: '300', currency: 'USD' },
      expiresAt: FAR,
      windows: [
        { every: 'PT1H', maxAmountMinor: '300', maxPayments: 2 },
        { every: 'P7D', maxAmountMinor: '300' },
      ],
    });
    assert.is((await pay(e, s.sessionToken, 100)).status, 200);
    assert.is((await pay(e, s.sessionToken, 100, e.gw2)).status, 200);
    const r = await pay(e, s.sessionToken, 1);
    assert.is(r.body.error.code, 'window_exceeded');
    assert.match(r.body.error.message, /allows 2 payments/);
    e.clock.t += HOUR;
    assert.is((await pay(e, s.sessionToken, 100)).status, 200, 'next hour');
    e.clock.t += HOUR;
    assert.is((await pay(e, s.sessionToken, 1)).body.error.code, 'budget_exceeded', 'the lifetime ceiling');
  });

  test(`${name}: a release goes back to a window that has ended`, async () => {
    if (!e) return;
    e.clock.t = T0 + 30 * DAY;
    const s = await createSession(e.gw, {
      budget: { amount: '1000', currency: 'USD' },
      expiresAt: FAR,
      windows: [{ every: 'PT1H', maxAmountMinor: '500', maxPayments: 1 }],
    });
    const base = {
      sessionId: s.sessionId,
      currency: 'USD',
      merchant: 'm.example',
      address: 'a',
      purpose: 'api:search',
      rail: 'ledger',
      velocity: false,
      chain: [s.sessionId],
    };
    const r = await reserve(e.gw.db, { ...base, paymentId: 'pay_wnd_release', amount: 400n, now: e.clock.t });
    assert.ok(r.ok);
    e.clock.t += 2 * HOUR;
    assert.ok(await release(e.gw.db, 'pay_wnd_release', e.clock.t));
    const w = await e.gw.db.get(`SELECT spent, reserved, payments FROM gw_session_windows WHERE session_id = ?`, [
      s.sessionId,
    ]);
    assert.equal([Number(w!.spent), Number(w!.reserved), Number(w!.payments)], [0, 0, 0]);
    const v = await call(e.gw.url, 'GET', `/sessions/${s.sessionId}`, { key: e.gw.ownerKey });
    assert.is(v.body.reservedMinor, '0');
    assert.is((await pay(e, s.sessionToken, 500)).status, 200);
  });

  test(`${name}: a hold committed below its maximum gives the rest back to every counter`, async () => {
    if (!e) return;
    e.clock.t = T0 + 35 * DAY;
    const p = await createSession(e.gw, {
      budget: { amount: '1000', currency: 'USD' },
      expiresAt: FAR,
      windows: [{ every: 'P1D', maxAmountMinor: '600' }],
    });
    const c = await call(e.gw.url, 'POST', `/sessions/${p.sessionId}/children`, {
      key: p.sessionToken,
      body: {
        budget: { amount: '500' },
        windows: [
          { every: 'PT1H', maxAmountMinor: '450' },
          { every: 'P1D', maxAmountMinor: '500' },
        ],
      },
    });
    assert.is(c.status, 201, c.text);
    const chain = [c.body.sessionId, p.sessionId];
    const r = await reserve(e.gw.db, {
      paymentId: 'pay_wnd_capture',
      sessionId: c.body.sessionId,
      amount: 400n,
      currency: 'USD',
      merchant: 'm.example',
      address: 'a',
      purpose: 'api:search',
      rail: 'ledger',
      velocity: false,
      chain,
      now: e.clock.t,
    });
    assert.ok(r.ok);
    const done = await commit(e.gw.db, {
      receiptId: 'rcpt_wnd_capture',
      paymentId: 'pay_wnd_capture',
      paidAt: e.clock.t,
      receipt: '{}',
      sessionId: c.body.sessionId,
      amount: 400n,
      captured: 150n,
      txRef: 'txid:capture',
      multi: true,
    });
    assert.ok(done.committed);
    assert.is(done.spentAfter, 150n);
    const counters = async () => ({
      sessions: (
        await e!.gw.db.all(`SELECT id, spent, reserved FROM gw_sessions WHERE id IN (?, ?) ORDER BY depth`, [
          p.sessionId,
          c.body.sessionId,
        ])
      ).map((x) => [Number(x.spent), Number(x.reserved)]),
      windows: (
        await e!.gw.db.all(
          `SELECT spent, reserved, payments FROM gw_session_windows
           WHERE session_id IN (?, ?) ORDER BY session_id, every`,
          [p.sessionId, c.body.sessionId],
        )
      ).map((x) => [Number(x.spent), Number(x.reserved), Number(x.payments)]),
    });
    const after = await counters();
    assert.equal(after.sessions, [
      [150, 0],
      [150, 0],
    ]);
    assert.equal(after.windows, [
      [150, 0, 1],
      [150, 0, 1],
      [150, 0, 1],
    ]);
    // Committed once: a second commit changes nothing.
    assert.not.ok(
      (
        await commit(e.gw.db, {
          receiptId: 'rcpt_2',
          paymentId: 'pay_wnd_capture',
          paidAt: e.clock.t,
          receipt: '{}',
          sessionId: c.body.sessionId,
          amount: 400n,
          captured: 150n,
          txRef: 'txid:capture',
          multi: true,
        })
      ).committed,
    );
    assert.equal(await counters(), after);
  });

  test(`${name}: a month window from the 31st`, async () => {
    if (!e) return;
    const start = Date.parse('2026-01-31T00:00:00Z');
    e.clock.t = Date.parse('2026-02-28T12:00:00Z');
    const s = await createSession(e.gw, {
      budget: { amount: '1000', currency: 'USD' },
      expiresAt: FAR,
      windows: [{ every: 'P1M', maxAmountMinor: '100' }],
      windowsStart: formatTimestamp(start),
    });
    assert.is((await pay(e, s.sessionToken, 100)).status, 200, 'February: from the 28th');
    e.clock.t = Date.parse('2026-03-30T23:59:59Z');
    const r = await pay(e, s.sessionToken, 1);
    assert.is(r.body.error.code, 'window_exceeded');
    assert.is(r.body.error.resetsAt, '2026-03-31T00:00:00Z');
    e.clock.t = Date.parse('2026-03-31T00:00:00Z');
    assert.is((await pay(e, s.sessionToken, 100)).status, 200, 'back to the 31st');
    e.clock.t = Date.parse('2026-04-30T00:00:00Z');
    assert.is((await pay(e, s.sessionToken, 100)).status, 200, 'April: the 30th');
  });

  test(`${name}: a soft limit pauses one window; the reset or the owner's continuation resumes it`, async () => {
    if (!e) return;
    e.clock.t = T0 + 40 * DAY;
    const s = await createSession(e.gw, {
      budget: { amount: '1000', currency: 'USD' },
      expiresAt: FAR,
      softLimit: { amount: '50' },
      windows: [{ every: 'P1D', maxAmountMinor: '100' }],
      windowsStart: formatTimestamp(T0),
    });
    assert.is((await pay(e, s.sessionToken, 80)).status, 200);
    const r = await pay(e, s.sessionToken, 30);
    assert.is(r.body.error.code, 'session_paused');
    let v = await call(e.gw.url, 'GET', `/sessions/${s.sessionId}`, { key: e.gw.ownerKey });
    assert.is(v.body.state, 'paused');
    assert.equal(v.body.pausedWindow, { every: 'P1D', resetsAt: formatTimestamp(T0 + 41 * DAY) });
    // The owner continues: this window alone is raised by at most softLimit.amount.
    const c = await call(e.gw.url, 'PATCH', `/sessions/${s.sessionId}`, {
      key: e.gw.ownerKey,
      body: { continuationToken: v.body.continuationToken },
    });
    assert.is(c.status, 200);
    assert.is((await pay(e, s.sessionToken, 30)).status, 200, 'within the raised window');
    assert.is((await pay(e, s.sessionToken, 41)).body.error.code, 'session_paused', 'paused again at 150');
    // Or the agent waits for the reset: the next window has the configured limit.
    e.clock.t = T0 + 41 * DAY;
    v = await call(e.gw.url, 'GET', `/sessions/${s.sessionId}`, { key: e.gw.ownerKey });
    assert.is(v.body.state, 'active');
    assert.is((await pay(e, s.sessionToken, 100)).status, 200);
    assert.is((await pay(e, s.sessionToken, 1)).body.error.code, 'session_paused');
  });

  test(`${name}: bad windows are refused naming the field`, async () => {
    if (!e) return;
    const bad = async (extra: Record<string, unknown>, field: RegExp) => {
      const r = await call(e!.gw.url, 'POST', '/sessions', {
        key: e!.gw.ownerKey,
        body: { budget: { amount: '100', currency: 'USD' }, purposes: ['api:search'], expiresAt: FAR, ...extra },
      });
      assert.is(r.status, 400, JSON.stringify(extra));
      assert.is(r.body.error.code, 'malformed');
      assert.match(r.body.error.message, field);
    };
    await bad({ windows: [{ every: 'P1D', maxAmountMinor: '101' }] }, /windows\[0\]\.maxAmountMinor/);
    await bad({ windows: [{ every: 'P2D', maxAmountMinor: '1' }] }, /windows\[0\]\.every/);
    await bad(
      {
        windows: [
          { every: 'P1D', maxAmountMinor: '1' },
          { every: 'P1D', maxAmountMinor: '2' },
        ],
      },
      /windows\[1\]\.every/,
    );
    await bad({ windows: [{ every: 'P1D', maxAmountMinor: '1', maxPayments: 0 }] }, /maxPayments/);
    await bad({ windows: [{ every: 'P1D', maxAmountMinor: '1', extra: 1 }] }, /windows\[0\]\.extra/);
    await bad({ windows: [] }, /windows/);
    await bad({ windowsStart: FAR }, /windowsStart/);
    await bad({ windows: [{ every: 'P1D', maxAmountMinor: '1' }], windowsStart: 'yesterday' }, /windowsStart/);
  });

  test(`${name}: two instances racing 50 payments at a window's edge never pass it`, async () => {
    if (!e?.gw2) return;
    await raceAtWindowEdge({ ...e, gw2: e.gw2 }, { payments: 50, maxAmountMinor: 100, maxPayments: 8 });
  });
}

suite('SQLite', async () => sqliteDb());
suite('PostgreSQL', () => postgresDb('budget windows on PostgreSQL'));

test.run();
