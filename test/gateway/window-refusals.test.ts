/**
 * Budget windows as an agent and an owner read them (PROTOCOL.md §13), on SQLite and PostgreSQL:
 * `window.exhausted` is told by the commit that fills a window (its own or an ancestor's), once,
 * and not by the refusals after it; a window that resets only after the session has ended says
 * so, with no `resetsAt` or `Retry-After` to wait for; every amount in a refusal's message
 * carries its currency.
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

const HOUR = 3_600_000;
const at = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');

interface Env {
  db: TestDb;
  gw: TestGateway;
  m: Merchant;
}

const pay = (e: Env, token: string, amount: number) =>
  proxy(e.gw, token, `${e.m.url}/p${amount}`, { purpose: 'api:search' });

const exhausted = (e: Env) => e.gw.events.filter((x) => x.type === 'window.exhausted');

function suite(name: string, open: () => Promise<TestDb | undefined>) {
  let e: Env | undefined;
  test.before(async () => {
    const db = await open();
    if (!db) return;
    const gw = await startTestGateway(db);
    e = { db, gw, m: await startMerchant({ amount: (path) => /^\/p(\d+)/.exec(path)?.[1] ?? '100' }) };
  });
  test.after(async () => {
    if (!e) return;
    await e.gw.close();
    await e.m.close();
    await e.db.drop();
  });

  test(`${name}: window.exhausted is told by the commit that fills the window, once`, async () => {
    if (!e) return;
    const s = await createSession(e.gw, {
      budget: { amount: '5000', currency: 'USD' },
      expiresAt: at(Date.now() + 48 * HOUR),
      windows: [{ every: 'P1D', maxAmountMinor: '1000' }],
    });
    const before = exhausted(e).length;
    assert.is((await pay(e, s.sessionToken, 600)).status, 200);
    await e.gw.gw.idle();
    assert.is(exhausted(e).length, before, 'a window with room left is not exhausted');
    const filled = await pay(e, s.sessionToken, 400);
    assert.is(filled.status, 200, filled.text);
    await e.gw.gw.idle();
    const told = exhausted(e).slice(before);
    assert.is(told.length, 1, JSON.stringify(told));
    const v = await call(e.gw.url, 'GET', `/sessions/${s.sessionId}`, { key: e.gw.ownerKey });
    assert.equal(told[0]!.data, {
      sessionId: s.sessionId,
      every: 'P1D',
      maxAmountMinor: '1000',
      spentMinor: '1000',
      payments: 1 + 1,
      currency: 'USD',
      paymentId: told[0]!.data.paymentId,
      resetsAt: v.body.windows[0].resetsAt,
      message: `the P1D window of this session is full (10.00 USD) until ${v.body.windows[0].resetsAt}`,
    });
    assert.match(String(told[0]!.data.paymentId), /^pay_/);
    const refused = await pay(e, s.sessionToken, 1);
    assert.is(refused.body.error.code, 'window_exceeded');
    await e.gw.gw.idle();
    assert.is(exhausted(e).length, before + 1, 'a refusal after it tells nothing new');
  });

  test(`${name}: a maxPayments window is exhausted by its last payment; a parent's by its child's`, async () => {
    if (!e) return;
    const p = await createSession(e.gw, {
      budget: { amount: '5000', currency: 'USD' },
      expiresAt: at(Date.now() + 48 * HOUR),
      windows: [{ every: 'PT1H', maxAmountMinor: '5000', maxPayments: 2 }],
    });
    const c = await call(e.gw.url, 'POST', `/sessions/${p.sessionId}/children`, {
      key: p.sessionToken,
      body: { budget: { amount: '1000' } },
    });
    assert.is(c.status, 201, c.text);
    const before = exhausted(e).length;
    assert.is((await pay(e, p.sessionToken, 10)).status, 200);
    assert.is((await pay(e, c.body.sessionToken, 10)).status, 200);
    await e.gw.gw.idle();
    const told = exhausted(e).slice(before);
    // The child's own copy of the window has room for one more; its parent's is full.
    assert.equal(
      told.map((x) => [x.data.sessionId, x.data.every, x.data.payments]),
      [[p.sessionId, 'PT1H', 2]],
    );
  });

  test(`${name}: a window that resets after the session ends says the session ends first`, async () => {
    if (!e) return;
    const ends = at(Date.now() + 2 * HOUR);
    const s = await createSession(e.gw, {
      budget: { amount: '5000', currency: 'USD' },
      expiresAt: ends,
      windows: [{ every: 'P1D', maxAmountMinor: '100' }],
    });
    assert.is((await pay(e, s.sessionToken, 100)).status, 200);
    const r = await pay(e, s.sessionToken, 50);
    assert.is(r.status, 402);
    assert.is(r.body.error.code, 'window_exceeded');
    assert.is(r.headers.get('retry-after'), null, 'no retry helps before the session ends');
    assert.is(r.body.error.resetsAt, undefined);
    assert.match(r.body.error.message, new RegExp(`after this session ends at ${ends}`));
    assert.match(r.body.error.message, /0\.50 USD/);

    // A window that resets before the end: resetsAt and Retry-After say when.
    const t = await createSession(e.gw, {
      budget: { amount: '5000', currency: 'USD' },
      expiresAt: at(Date.now() + 48 * HOUR),
      windows: [{ every: 'PT1H', maxAmountMinor: '100' }],
    });
    assert.is((await pay(e, t.sessionToken, 100)).status, 200);
    const w = await pay(e, t.sessionToken, 50);
    assert.is(w.body.error.code, 'window_exceeded');
    const wait = Number(w.headers.get('retry-after'));
    assert.ok(wait >= 1 && wait <= 3600, `Retry-After ${wait}`);
    assert.ok(Date.parse(w.body.error.resetsAt) <= Date.now() + HOUR);
    assert.match(w.body.error.message, /exceeds what the PT1H window of this session has left \(0\.00 USD\)/);
  });

  test(`${name}: amounts in refusals carry their currency`, async () => {
    if (!e) return;
    const m = await startMerchant({ currency: 'EUR', amount: (path) => /^\/p(\d+)/.exec(path)?.[1] ?? '100' });
    const eur = (token: string, amount: number) =>
      proxy(e!.gw, token, `${m.url}/p${amount}`, { purpose: 'api:search' });
    const session = (extra: Record<string, unknown>) =>
      createSession(e!.gw, { budget: { amount: '250', currency: 'EUR' }, expiresAt: at(Date.now() + HOUR), ...extra });
    try {
      const s = await session({});
      assert.is((await eur(s.sessionToken, 200)).status, 200);
      const r = await eur(s.sessionToken, 100);
      assert.is(r.body.error.code, 'budget_exceeded');
      assert.is(r.body.error.message, 'the payment of 1.00 EUR exceeds the remaining budget of 0.50 EUR');
      const v = await session({ velocity: { maxAmountPerMerchantPerDay: '200' } });
      assert.is((await eur(v.sessionToken, 150)).status, 200);
      const over = await eur(v.sessionToken, 100);
      assert.is(over.body.error.code, 'velocity_exceeded');
      assert.is(over.body.error.message, 'at most 2.00 EUR per merchant per day');
      // A child over what its parent has left names the parent and the amount left.
      const parent = await session({ budget: { amount: '400', currency: 'EUR' } });
      const kid = await call(e.gw.url, 'POST', `/sessions/${parent.sessionId}/children`, {
        key: parent.sessionToken,
        body: { budget: { amount: '400' } },
      });
      assert.is((await eur(parent.sessionToken, 300)).status, 200);
      const k = await eur(kid.body.sessionToken, 200);
      assert.is(k.body.error.code, 'budget_exceeded');
      assert.is(
        k.body.error.message,
        `the payment of 2.00 EUR exceeds what its parent session ${parent.sessionId} has left (1.00 EUR)`,
      );
    } finally {
      await m.close();
    }
  });
}

suite('sqlite', async () => sqliteDb());
suite('postgres', () => postgresDb('window refusals on PostgreSQL'));

test.run();
