/**
 * Child sessions (PROTOCOL.md §14) on SQLite and PostgreSQL: made with the parent's token, they
 * only narrow (a widening field is 400 `delegation_invalid` naming it, each rule accepted at its
 * limit); depth is bounded; a child pays through /proxy and every payment counts on each
 * ancestor, so two siblings racing 200 payments on two instances never pass their parent; a
 * revoked parent stops its descendants before any merchant is contacted; the owner sees the tree.
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

const FAR = '2036-01-01T00:00:00Z';
const SOON = '2035-01-01T00:00:00Z';

interface Env {
  db: TestDb;
  gw: TestGateway;
  gw2: TestGateway;
  m: Merchant;
}

const child = (gw: { url: string }, parent: { sessionId: string; sessionToken: string }, body: unknown) =>
  call(gw.url, 'POST', `/sessions/${parent.sessionId}/children`, { key: parent.sessionToken, body });

async function made(gw: { url: string }, parent: { sessionId: string; sessionToken: string }, body: unknown) {
  const r = await child(gw, parent, body);
  if (r.status !== 201) throw new Error(`child: ${r.status} ${r.text}`);
  return r.body as { sessionId: string; sessionToken: string; parentId: string; depth: number };
}

function suite(name: string, open: () => Promise<TestDb | undefined>) {
  let e: Env | undefined;
  test.before(async () => {
    const db = await open();
    if (!db) return;
    const deps = { maxSessionSeconds: 20 * 365 * 86400 };
    const gw = await startTestGateway(db, deps);
    const gw2 = await startTestGateway(db, deps, gw.ownerKey);
    e = { db, gw, gw2, m: await startMerchant({ amount: (p) => /^\/p(\d+)/.exec(p)?.[1] ?? '10' }) };
  });
  test.after(async () => {
    if (!e) return;
    await e.gw2.close();
    await e.gw.close();
    await e.m.close();
    await e.db.drop();
  });

  const root = (extra: Record<string, unknown> = {}) =>
    createSession(e!.gw, {
      budget: { amount: '1000', currency: 'USD' },
      purposes: ['api:*', 'data:read'],
      expiresAt: FAR,
      merchantAllowlist: ['127.0.0.1', '*.example.com'],
      merchantBlocklist: ['bad.example.com'],
      velocity: { maxPaymentsPerHour: 500 },
      windows: [{ every: 'P1D', maxAmountMinor: '800', maxPayments: 300 }],
      ...extra,
    });

  test(`${name}: each narrowing rule refused when broken, accepted at its limit`, async () => {
    if (!e) return;
    const p = await root();
    const refused = async (body: Record<string, unknown>, field: string) => {
      const r = await child(e!.gw, p, { budget: { amount: '100' }, ...body });
      assert.is(r.status, 400, `${field}: ${r.text}`);
      assert.is(r.body.error.code, 'delegation_invalid', field);
      assert.ok(r.body.error.message.startsWith(`${field}:`), r.body.error.message);
    };
    await refused({ budget: { amount: '1001' } }, 'budget.amount');
    await refused({ budget: { amount: '10', currency: 'EUR' } }, 'budget.currency');
    await refused({ purposes: ['api:search', 'data:write'] }, 'purposes[1]');
    await refused({ purposes: ['data:*'] }, 'purposes[0]');
    await refused({ expiresAt: '2036-01-01T00:00:01Z' }, 'expiresAt');
    await refused({ merchantAllowlist: ['127.0.0.1', '*.other.com'] }, 'merchantAllowlist[1]');
    await refused({ velocity: { maxPaymentsPerHour: 501 } }, 'velocity.maxPaymentsPerHour');
    await refused({ windows: [{ every: 'PT1H', maxAmountMinor: '10' }] }, 'windows');
    await refused(
      { windows: [{ every: 'P1D', maxAmountMinor: '801' }], budget: { amount: '900' } },
      'windows[0].maxAmountMinor',
    );
    await refused({ windows: [{ every: 'P1D', maxAmountMinor: '10' }] }, 'windows[0].maxPayments');
    await refused({ windows: [{ every: 'P1D', maxAmountMinor: '10', maxPayments: 301 }] }, 'windows[0].maxPayments');
    const bad = await child(e.gw, p, { budget: { amount: '10' }, softLimit: { amount: '1' } });
    assert.is(bad.status, 400);
    assert.is(bad.body.error.code, 'malformed');
    // Every limit at once, exactly at the parent's.
    const c = await made(e.gw, p, {
      budget: { amount: '1000', currency: 'USD' },
      purposes: ['api:*', 'data:read'],
      expiresAt: FAR,
      merchantAllowlist: ['127.0.0.1', '*.example.com'],
      velocity: { maxPaymentsPerHour: 500 },
      windows: [
        { every: 'P1D', maxAmountMinor: '800', maxPayments: 300 },
        { every: 'PT1H', maxAmountMinor: '50' },
      ],
      label: 'at the limit',
    });
    assert.is(c.parentId, p.sessionId);
    assert.is(c.depth, 1);
    const v = await call(e.gw.url, 'GET', `/sessions/${c.sessionId}`, { key: e.gw.ownerKey });
    assert.equal(v.body.merchantBlocklist, ['bad.example.com'], "the parent's blocks hold");
    assert.equal(
      v.body.windows.map((w: { every: string }) => w.every),
      ['P1D', 'PT1H'],
    );
    // An absent field is the parent's.
    const d = await made(e.gw, p, { budget: { amount: '5' } });
    const dv = await call(e.gw.url, 'GET', `/sessions/${d.sessionId}`, { key: e.gw.ownerKey });
    assert.equal(dv.body.purposes, ['api:*', 'data:read']);
    assert.is(dv.body.windows[0].maxAmountMinor, '5', "the parent's window, within the child's ceiling");
    // The owner's key is not the agent's: a child is made with the parent's token only.
    const owner = await call(e.gw.url, 'POST', `/sessions/${p.sessionId}/children`, {
      key: e.gw.ownerKey,
      body: { budget: { amount: '1' } },
    });
    assert.is(owner.status, 401);
    const other = await root();
    const wrong = await call(e.gw.url, 'POST', `/sessions/${p.sessionId}/children`, {
      key: other.sessionToken,
      body: { budget: { amount: '1' } },
    });
    assert.is(wrong.status, 404);
  });

  test(`${name}: depth is bounded (default 4)`, async () => {
    if (!e) return;
    let s: { sessionId: string; sessionToken: string } = await root();
    for (let depth = 1; depth <= 4; depth++) {
      const c = await made(e.gw, s, { budget: { amount: String(100 - depth) }, expiresAt: SOON });
      assert.is(c.depth, depth);
      s = c;
    }
    const r = await child(e.gw, s, { budget: { amount: '1' } });
    assert.is(r.status, 400);
    assert.is(r.body.error.code, 'delegation_invalid');
    assert.match(r.body.error.message, /^depth:/);
    // The leaf pays, and every ancestor counts it.
    assert.is((await proxy(e.gw, s.sessionToken, `${e.m.url}/p7`, { purpose: 'api:search' })).status, 200);
  });

  test(`${name}: a child pays through /proxy, counted on its parent; receipts and events name it`, async () => {
    if (!e) return;
    const p = await root();
    const c = await made(e.gw, p, { budget: { amount: '300' }, purposes: ['api:search'] });
    const r = await proxy(e.gw2, c.sessionToken, `${e.m.url}/p120`, { purpose: 'api:search' });
    assert.is(r.status, 200);
    assert.is(r.headers.get('x-ctl-session-id'), c.sessionId);
    const pv = await call(e.gw.url, 'GET', `/sessions/${p.sessionId}`, { key: e.gw.ownerKey });
    assert.is(pv.body.spentMinor, '120', 'the parent counts its child');
    assert.is(pv.body.windows[0].spentMinor, '120', "and so does the parent's window");
    const cv = await call(e.gw.url, 'GET', '/session', { key: c.sessionToken });
    assert.is(cv.body.spentMinor, '120');
    assert.is(cv.body.parentId, p.sessionId);
    const rc = await call(e.gw.url, 'GET', `/sessions/${c.sessionId}/receipts`, { key: e.gw.ownerKey });
    assert.is(rc.body.receipts.length, 1);
    const done = [...e.gw.events, ...e.gw2.events].filter((x) => x.type === 'payment.completed');
    assert.ok(done.some((x) => x.data.sessionId === c.sessionId && x.data.amountMinor === '120'));
    // Out of the child's purposes, or past its own ceiling: refused.
    assert.is(
      (await proxy(e.gw, c.sessionToken, `${e.m.url}/p1`, { purpose: 'data:read' })).body.error.code,
      'purpose_not_allowed',
    );
    assert.is(
      (await proxy(e.gw, c.sessionToken, `${e.m.url}/p181`, { purpose: 'api:search' })).body.error.code,
      'budget_exceeded',
    );
    // The parent's own payments and the child's share the parent's ceiling.
    assert.is(
      (await proxy(e.gw, p.sessionToken, `${e.m.url}/p800`, { purpose: 'api:x' })).body.error.code,
      'window_exceeded',
    );
    const tree = await call(e.gw.url, 'GET', `/sessions/${p.sessionId}/tree`, { key: e.gw.ownerKey });
    assert.is(tree.body.session.sessionId, p.sessionId);
    assert.is(tree.body.children[0].session.sessionId, c.sessionId);
    assert.is(tree.body.children[0].session.spentMinor, '120');
  });

  test(`${name}: two siblings racing 200 payments on two instances never pass their parent`, async () => {
    if (!e) return;
    const p = await createSession(e.gw, { budget: { amount: '1000', currency: 'USD' }, expiresAt: FAR });
    const a = await made(e.gw, p, { budget: { amount: '800' } });
    const b = await made(e.gw2, p, { budget: { amount: '800' } });
    const paidBefore = e.m.paid.length;
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        proxy(i % 2 ? e!.gw2 : e!.gw, (i % 4 < 2 ? a : b).sessionToken, `${e!.m.url}/p10`, { purpose: 'api:search' }),
      ),
    );
    const ok = results.filter((r) => r.status === 200).length;
    assert.is(ok, 100, results.map((r) => r.status).join(','));
    const odd = results.filter((r) => r.status !== 200 && r.body?.error?.code !== 'budget_exceeded');
    assert.ok(odd.length === 0, JSON.stringify(odd.map((r) => [r.status, r.body])));
    assert.is(e.m.paid.length - paidBefore, 100);
    const views = await Promise.all(
      [p, a, b].map((s) => call(e!.gw.url, 'GET', `/sessions/${s.sessionId}`, { key: e!.gw.ownerKey })),
    );
    assert.is(views[0]!.body.spentMinor, '1000');
    assert.is(views[0]!.body.reservedMinor, '0');
    assert.is(BigInt(views[1]!.body.spentMinor) + BigInt(views[2]!.body.spentMinor), 1000n);
  });

  test(`${name}: a parent's velocity limits count its children's payments too`, async () => {
    if (!e) return;
    const p = await createSession(e.gw, {
      budget: { amount: '1000', currency: 'USD' },
      expiresAt: FAR,
      velocity: { maxPaymentsPerHour: 3, maxAmountPerMerchantPerDay: '100' },
    });
    const a = await made(e.gw, p, { budget: { amount: '500' } });
    const b = await made(e.gw, p, { budget: { amount: '500' } });
    const pay = (s: { sessionToken: string }, n: number) =>
      proxy(e!.gw, s.sessionToken, `${e!.m.url}/p${n}`, { purpose: 'api:search' });
    assert.is((await pay(a, 60)).status, 200);
    const over = await pay(b, 60);
    assert.is(over.body?.error?.code, 'velocity_exceeded', "the per-merchant day limit is the parent's too");
    assert.is((await pay(b, 30)).status, 200);
    assert.is((await pay(p, 5)).status, 200);
    const fourth = await pay(a, 1);
    assert.is(fourth.body?.error?.code, 'velocity_exceeded', "the hourly count is the parent's too");
    const pv = await call(e.gw.url, 'GET', `/sessions/${p.sessionId}`, { key: e.gw.ownerKey });
    assert.is(pv.body.spentMinor, '95');
  });

  test(`${name}: siblings racing on two instances never pass their parent's hourly payment count`, async () => {
    if (!e) return;
    const p = await createSession(e.gw, {
      budget: { amount: '1000', currency: 'USD' },
      expiresAt: FAR,
      velocity: { maxPaymentsPerHour: 10 },
    });
    const a = await made(e.gw, p, { budget: { amount: '500' } });
    const b = await made(e.gw2, p, { budget: { amount: '500' } });
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        proxy(i % 2 ? e!.gw2 : e!.gw, (i % 4 < 2 ? a : b).sessionToken, `${e!.m.url}/p1`, { purpose: 'api:search' }),
      ),
    );
    assert.is(results.filter((r) => r.status === 200).length, 10, results.map((r) => r.status).join(','));
    const odd = results.filter((r) => r.status !== 200 && r.body?.error?.code !== 'velocity_exceeded');
    assert.ok(odd.length === 0, JSON.stringify(odd.map((r) => [r.status, r.body])));
  });

  test(`${name}: a revoked parent stops every descendant before any merchant is contacted`, async () => {
    if (!e) return;
    const p = await root();
    const c = await made(e.gw, p, { budget: { amount: '100' } });
    const g = await made(e.gw, c, { budget: { amount: '50' } });
    assert.is((await proxy(e.gw, g.sessionToken, `${e.m.url}/p5`, { purpose: 'api:search' })).status, 200);
    const r = await call(e.gw2.url, 'DELETE', `/sessions/${c.sessionId}`, { key: e.gw.ownerKey });
    assert.is(r.status, 200);
    const seen = e.m.seen.length;
    for (const gw of [e.gw, e.gw2]) {
      const x = await proxy(gw, g.sessionToken, `${e.m.url}/p5`, { purpose: 'api:search' });
      assert.is(x.status, 410);
      assert.is(x.body.error.code, 'session_revoked');
    }
    assert.is(e.m.seen.length, seen, 'no merchant contacted');
    const gv = await call(e.gw.url, 'GET', `/sessions/${g.sessionId}`, { key: e.gw.ownerKey });
    assert.is(gv.body.state, 'revoked');
    assert.ok(e.gw2.events.some((x) => x.type === 'session.revoked' && x.data.sessionId === g.sessionId));
    // The parent above still pays; a new child below the revoked one is refused.
    assert.is((await proxy(e.gw, p.sessionToken, `${e.m.url}/p5`, { purpose: 'api:search' })).status, 200);
    assert.is((await child(e.gw, c, { budget: { amount: '1' } })).status, 410);
  });
}

suite('SQLite', async () => sqliteDb());
suite('PostgreSQL', () => postgresDb('child sessions on PostgreSQL'));

test.run();
