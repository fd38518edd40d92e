/**
 * Every row of spec §3's table, and the gateway's refusals with their codes and statuses.
 * A refusal must make no payment: the merchant's paid count and the ledger stay unchanged.
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
  inOneHour,
  type TestGateway,
  type Merchant,
  type TestDb,
} from './helpers.js';

let db: TestDb;
let gw: TestGateway;
let merchant: Merchant;
const ledgerRows = async () =>
  Number((await gw.db.get<{ n: unknown }>(`SELECT COUNT(*) AS n FROM gw_ledger WHERE status = 'paid'`))!.n);

test.before(async () => {
  // states-pg.test.ts runs this same file on PostgreSQL (its one-statement reservation path).
  db =
    (process.env.CTL_GATEWAY_TEST_PG === '1'
      ? await postgresDb('the spec §3 table on PostgreSQL (ran on SQLite instead)')
      : undefined) ?? sqliteDb();
  gw = await startTestGateway(db, { expiryMaxSleepMs: 200 });
  merchant = await startMerchant({ amount: '100' });
});
test.after(async () => {
  await gw.close();
  await merchant.close();
  await db.drop();
});

/** Asserts a refusal that paid nothing. */
async function refused(
  res: Awaited<ReturnType<typeof call>>,
  status: number,
  code: string,
  paidBefore: number,
  ledgerBefore: number,
) {
  assert.is(res.status, status, res.text);
  assert.is(res.body?.error?.code, code, res.text);
  assert.type(res.body.error.message, 'string');
  assert.is(res.headers.get('x-ctl-gateway-error'), code);
  assert.is(merchant.paid.length, paidBefore, 'no paid retry reached the merchant');
  assert.is(await ledgerRows(), ledgerBefore, 'no payment on the rail');
}

test('row 1: POST /sessions → active, with token, id, revocation URL and a signed internal grant', async () => {
  const s = await createSession(gw);
  assert.match(s.sessionToken, /^gw_sess_[A-Za-z0-9_-]{43}$/);
  assert.match(s.sessionId, /^sess_/);
  assert.is(s.revocationUrl, `${gw.url}/sessions/${s.sessionId}`);
  assert.match(s.policyHash, /^[0-9a-f]{64}$/);
  const v = await call(gw.url, 'GET', `/sessions/${s.sessionId}`, { key: gw.ownerKey });
  assert.is(v.body.state, 'active');
  assert.is(v.body.grantId, s.grantId);
  assert.is(v.body.continuationToken, undefined);
  const rev = await call(gw.url, 'GET', `/revoke?grantId=${s.grantId}`);
  assert.equal(rev.body, { grantId: s.grantId, revoked: false });
});

test('POST /sessions: bad fields → 400 naming the field; auth and ownership', async () => {
  const base = { budget: { amount: '1000', currency: 'USD' }, purposes: ['api:search'], expiresAt: inOneHour() };
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ ...base, budget: undefined }, /^budget/],
    [{ ...base, budget: { amount: '10.5', currency: 'USD' } }, /^budget\.amount/],
    [{ ...base, budget: { amount: 1000, currency: 'USD' } }, /^budget\.amount/],
    [{ ...base, budget: { amount: '01', currency: 'USD' } }, /^budget\.amount/],
    [{ ...base, budget: { amount: '100', currency: 'usd' } }, /^budget\.currency/],
    [{ ...base, purposes: [] }, /^purposes/],
    [{ ...base, purposes: ['*'] }, /^purposes\[0\]/],
    [{ ...base, expiresAt: '2001-01-01T00:00:00Z' }, /^expiresAt/],
    [{ ...base, expiresAt: '2099-01-01T00:00:00+00:00' }, /^expiresAt/],
    [{ ...base, velocity: { maxPaymentsPerHour: 0 } }, /^velocity\.maxPaymentsPerHour/],
    [{ ...base, softLimit: { amount: '-1' } }, /^softLimit\.amount/],
    [{ ...base, trustLevel: 2 }, /^trustLevel/],
    [{ ...base, merchantAllowlist: ['a b'] }, /^merchantAllowlist\[0\]/],
    [{ ...base, colour: 'red' }, /^colour/],
  ];
  for (const [body, field] of cases) {
    const res = await call(gw.url, 'POST', '/sessions', { key: gw.ownerKey, body: JSON.parse(JSON.stringify(body)) });
    assert.is(res.status, 400, JSON.stringify(body));
    assert.is(res.body.error.code, 'malformed');
    assert.match(res.body.error.message, field);
  }
  assert.is((await call(gw.url, 'POST', '/sessions', { body: base })).status, 401);
  assert.is(
    (await call(gw.url, 'POST', '/sessions', { key: 'ctlk_nosuchkey_' + 'a'.repeat(43), body: base })).status,
    401,
  );
  // Another owner's session answers 404 as if it did not exist.
  const created = (
    await call(gw.url, 'POST', '/admin/owners', { key: 'test-admin-key-0123456789', body: { label: 'other' } })
  ).body;
  const other = created.apiKey;
  const s = await createSession(gw);
  for (const [m, p] of [
    ['GET', `/sessions/${s.sessionId}`],
    ['DELETE', `/sessions/${s.sessionId}`],
    ['GET', `/sessions/${s.sessionId}/receipts`],
  ]) {
    const res = await call(gw.url, m!, p!, { key: other });
    assert.is(res.status, 404, `${m} ${p}`);
  }
  const list = await call(gw.url, 'GET', '/sessions', { key: other });
  assert.equal(list.body.sessions, []);
  // Owner keys cannot create owners; a revoked owner key stops working at once.
  assert.is((await call(gw.url, 'POST', '/admin/owners', { key: other, body: { label: 'x' } })).status, 403);
  const otherId = created.ownerId;
  assert.is(
    (await call(gw.url, 'DELETE', `/admin/owners/${otherId}`, { key: 'test-admin-key-0123456789' })).status,
    200,
  );
  assert.is((await call(gw.url, 'GET', '/sessions', { key: other })).status, 401);
  assert.is(
    (await call(gw.url, 'DELETE', '/admin/owners/nosuchowner', { key: 'test-admin-key-0123456789' })).status,
    404,
  );
});

test('GET /sessions pages with a cursor', async () => {
  const owner = (
    await call(gw.url, 'POST', '/admin/owners', { key: 'test-admin-key-0123456789', body: { label: 'pager' } })
  ).body.apiKey;
  const g2 = { ...gw, ownerKey: owner };
  const ids = new Set<string>();
  for (let i = 0; i < 5; i++) ids.add((await createSession(g2)).sessionId);
  const seen: string[] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 5; i++) {
    const res = await call(gw.url, 'GET', `/sessions?limit=2${cursor ? `&cursor=${cursor}` : ''}`, { key: owner });
    assert.is(res.status, 200);
    seen.push(...res.body.sessions.map((s: { sessionId: string }) => s.sessionId));
    cursor = res.body.nextCursor;
    if (!cursor) break;
  }
  assert.is(seen.length, 5);
  assert.equal(new Set(seen), ids);
});

test('row 3: purpose not allowed → 402 purpose_not_allowed, nothing paid; payment.denied emitted', async () => {
  const s = await createSession(gw, { purposes: ['api:search', 'maps:*'] });
  const p = merchant.paid.length;
  const l = await ledgerRows();
  await refused(
    await proxy(gw, s.sessionToken, `${merchant.url}/a`, { purpose: 'api:other' }),
    402,
    'purpose_not_allowed',
    p,
    l,
  );
  await refused(await proxy(gw, s.sessionToken, `${merchant.url}/a`), 402, 'purpose_not_allowed', p, l);
  assert.ok(
    gw.events.some(
      (e) => e.type === 'payment.denied' && e.data.sessionId === s.sessionId && e.data.code === 'purpose_not_allowed',
    ),
  );
  // `<domain>:*` allows every kind of the domain.
  assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/a`, { purpose: 'maps:tiles' })).status, 200);
});

test('row 3: amount over the remaining budget → 402 budget_exceeded, nothing paid', async () => {
  const s = await createSession(gw, { budget: { amount: '250', currency: 'USD' } });
  assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/1`, { purpose: 'api:search' })).status, 200);
  assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/2`, { purpose: 'api:search' })).status, 200);
  const p = merchant.paid.length;
  const l = await ledgerRows();
  await refused(
    await proxy(gw, s.sessionToken, `${merchant.url}/3`, { purpose: 'api:search' }),
    402,
    'budget_exceeded',
    p,
    l,
  );
  const v = await call(gw.url, 'GET', `/sessions/${s.sessionId}`, { key: gw.ownerKey });
  assert.is(v.body.spentMinor, '200');
  assert.is(v.body.remainingMinor, '50');
  assert.is(v.body.reservedMinor, '0');
});

test('merchant allow/block globs on the target host → 402 destination_not_allowed', async () => {
  const p = merchant.paid.length;
  const l = await ledgerRows();
  const a = await createSession(gw, { merchantAllowlist: ['*.example.com'] });
  await refused(
    await proxy(gw, a.sessionToken, `${merchant.url}/g`, { purpose: 'api:search' }),
    402,
    'destination_not_allowed',
    p,
    l,
  );
  const b = await createSession(gw, { merchantAllowlist: ['127.0.0.*'], merchantBlocklist: ['127.0.0.1'] });
  await refused(
    await proxy(gw, b.sessionToken, `${merchant.url}/g`, { purpose: 'api:search' }),
    402,
    'destination_not_allowed',
    p,
    l,
  );
  const c = await createSession(gw, { merchantAllowlist: ['127.0.0.*'] });
  assert.is((await proxy(gw, c.sessionToken, `${merchant.url}/g`, { purpose: 'api:search' })).status, 200);
});

test('velocity: payments per hour and amount per merchant per day → 402 velocity_exceeded', async () => {
  const a = await createSession(gw, { velocity: { maxPaymentsPerHour: 2 } });
  for (let i = 0; i < 2; i++)
    assert.is((await proxy(gw, a.sessionToken, `${merchant.url}/v`, { purpose: 'api:search' })).status, 200);
  await refused(
    await proxy(gw, a.sessionToken, `${merchant.url}/v`, { purpose: 'api:search' }),
    402,
    'velocity_exceeded',
    merchant.paid.length,
    await ledgerRows(),
  );
  const b = await createSession(gw, { velocity: { maxAmountPerMerchantPerDay: '250' } });
  for (let i = 0; i < 2; i++)
    assert.is((await proxy(gw, b.sessionToken, `${merchant.url}/v`, { purpose: 'api:search' })).status, 200);
  await refused(
    await proxy(gw, b.sessionToken, `${merchant.url}/v`, { purpose: 'api:search' }),
    402,
    'velocity_exceeded',
    merchant.paid.length,
    await ledgerRows(),
  );
});

test('merchant terms: other currency → 402 currency_mismatch; bad X-Payment → 502 payment_terms_refused', async () => {
  const eur = await startMerchant({ amount: '100', currency: 'EUR' });
  const bad = await startMerchant({ amount: '1.5' });
  try {
    const s = await createSession(gw);
    await refused(
      await proxy(gw, s.sessionToken, `${eur.url}/x`, { purpose: 'api:search' }),
      402,
      'currency_mismatch',
      merchant.paid.length,
      await ledgerRows(),
    );
    const r = await proxy(gw, s.sessionToken, `${bad.url}/x`, { purpose: 'api:search' });
    assert.is(r.status, 502);
    assert.is(r.body.error.code, 'payment_terms_refused');
    assert.is(bad.paid.length, 0);
    assert.is(eur.paid.length, 0);
  } finally {
    await eur.close();
    await bad.close();
  }
});

test('bad or missing session token → 401; missing X-Target-Url → 400', async () => {
  assert.is((await proxy(gw, 'gw_sess_nope', `${merchant.url}/x`)).status, 401);
  const r = await call(gw.url, 'POST', '/proxy', { headers: { 'x-target-url': `${merchant.url}/x` } });
  assert.is(r.status, 401);
  const s = await createSession(gw);
  assert.is((await call(gw.url, 'POST', '/proxy', { key: s.sessionToken })).status, 400);
});

test('row 6: DELETE → revoked at once; the next attempt is refused 410 before anything is forwarded', async () => {
  const s = await createSession(gw);
  assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/r`, { purpose: 'api:search' })).status, 200);
  const d = await call(gw.url, 'DELETE', `/sessions/${s.sessionId}`, { key: gw.ownerKey });
  assert.is(d.status, 200);
  assert.is(d.body.state, 'revoked');
  const seen = merchant.seen.length;
  await refused(
    await proxy(gw, s.sessionToken, `${merchant.url}/r`, { purpose: 'api:search' }),
    410,
    'session_revoked',
    merchant.paid.length,
    await ledgerRows(),
  );
  await refused(
    await proxy(gw, s.sessionToken, `${merchant.url}/free`),
    410,
    'session_revoked',
    merchant.paid.length,
    await ledgerRows(),
  );
  assert.is(merchant.seen.length, seen, 'nothing forwarded after revocation');
  const rev = await call(gw.url, 'GET', `/revoke?grantId=${s.grantId}`);
  assert.is(rev.body.revoked, true);
  assert.type(rev.body.revokedAt, 'string');
  assert.ok(gw.events.some((e) => e.type === 'session.revoked' && e.data.sessionId === s.sessionId));
  // spec §3 rule 2: the payment made before revocation stays.
  const rc = await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey });
  assert.is(rc.body.receipts.length, 1);
  // Revoked sessions are in the Trust Bundle's revokedGrants.
  const bundle = (await call(gw.url, 'GET', '/.well-known/ctl-trust-bundle.json')).body;
  assert.ok(bundle.revokedGrants.includes(s.grantId));
  // DELETE again: same answer, no second event.
  const n = gw.events.filter((e) => e.type === 'session.revoked' && e.data.sessionId === s.sessionId).length;
  assert.is((await call(gw.url, 'DELETE', `/sessions/${s.sessionId}`, { key: gw.ownerKey })).body.state, 'revoked');
  assert.is(gw.events.filter((e) => e.type === 'session.revoked' && e.data.sessionId === s.sessionId).length, n);
});

test('row 7: expiresAt reached → expired by the timer with no traffic; then 410 session_expired', async () => {
  const expiresAt = new Date(Math.ceil((Date.now() + 1500) / 1000) * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
  const s = await createSession(gw, { expiresAt });
  assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/e`, { purpose: 'api:search' })).status, 200);
  const wait = Date.parse(expiresAt) - Date.now() + 600;
  await new Promise((r) => setTimeout(r, wait));
  assert.ok(
    gw.events.some((e) => e.type === 'session.expired' && e.data.sessionId === s.sessionId),
    'session.expired without traffic',
  );
  const row = await gw.db.get<{ state: string }>(`SELECT state FROM gw_sessions WHERE id = ?`, [s.sessionId]);
  assert.is(row!.state, 'expired', 'stored state changed by the timer');
  const seen = merchant.seen.length;
  await refused(
    await proxy(gw, s.sessionToken, `${merchant.url}/e`, { purpose: 'api:search' }),
    410,
    'session_expired',
    merchant.paid.length,
    await ledgerRows(),
  );
  assert.is(merchant.seen.length, seen);
});

test('rows 4–5: soft ceiling pauses (409), continuation raises it once; the token used twice fails', async () => {
  const s = await createSession(gw, { budget: { amount: '200', currency: 'USD' }, softLimit: { amount: '100' } });
  for (let i = 0; i < 2; i++)
    assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/s`, { purpose: 'api:search' })).status, 200);
  await refused(
    await proxy(gw, s.sessionToken, `${merchant.url}/s`, { purpose: 'api:search' }),
    409,
    'session_paused',
    merchant.paid.length,
    await ledgerRows(),
  );
  const v = await call(gw.url, 'GET', `/sessions/${s.sessionId}`, { key: gw.ownerKey });
  assert.is(v.body.state, 'paused');
  assert.match(v.body.continuationToken, /^ctn_/);
  const ev = gw.events.find((e) => e.type === 'session.paused' && e.data.sessionId === s.sessionId);
  assert.ok(ev);
  assert.is(ev!.data.continuationToken, v.body.continuationToken);
  // Still paused: refused again, no second pause event.
  await refused(
    await proxy(gw, s.sessionToken, `${merchant.url}/s`, { purpose: 'api:search' }),
    409,
    'session_paused',
    merchant.paid.length,
    await ledgerRows(),
  );
  assert.is(gw.events.filter((e) => e.type === 'session.paused' && e.data.sessionId === s.sessionId).length, 1);
  // A forged token is refused; the real one works once.
  const forged = v.body.continuationToken.slice(0, -2) + (v.body.continuationToken.endsWith('AA') ? 'BA' : 'AA');
  const f = await call(gw.url, 'PATCH', `/sessions/${s.sessionId}`, {
    key: gw.ownerKey,
    body: { continuationToken: forged },
  });
  assert.is(f.status, 403);
  assert.is(f.body.error.code, 'continuation_invalid');
  const [a, b] = await Promise.all([
    call(gw.url, 'PATCH', `/sessions/${s.sessionId}`, {
      key: gw.ownerKey,
      body: { continuationToken: v.body.continuationToken },
    }),
    call(gw.url, 'PATCH', `/sessions/${s.sessionId}`, {
      key: s.sessionToken,
      body: { continuationToken: v.body.continuationToken },
    }),
  ]);
  const statuses = [a.status, b.status].sort();
  assert.equal(statuses, [200, 403], `${a.text} ${b.text}`);
  const ok = a.status === 200 ? a : b;
  assert.is(ok.body.state, 'active');
  assert.is(ok.body.budget.amount, '300');
  assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/s`, { purpose: 'api:search' })).status, 200);
  const again = await call(gw.url, 'PATCH', `/sessions/${s.sessionId}`, {
    key: gw.ownerKey,
    body: { continuationToken: v.body.continuationToken },
  });
  assert.is(again.status, 403);
  // The re-minted grant carries the raised ceiling.
  const rc = await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey });
  assert.is(rc.body.receipts.at(-1).sba.grant.maxAmountMinor, '300');
});

test('health, readiness, metrics, JWKS and key rotation', async () => {
  assert.is((await call(gw.url, 'GET', '/healthz')).status, 200);
  assert.is((await call(gw.url, 'GET', '/readyz')).status, 200);
  const m = await call(gw.url, 'GET', '/metrics');
  assert.match(m.text, /ctl_gateway_payments_total\{rail="ledger"\} \d+/);
  assert.match(m.text, /ctl_gateway_refusals_total\{code="budget_exceeded",rail="ledger"\} \d+/);
  const before = (await call(gw.url, 'GET', '/.well-known/ctl-keys.json')).body.keys;
  const oldReceiptKid = before.find((k: any) => k.purposes[0] === 'receipt' && k.status === 'active').kid;
  const r = await call(gw.url, 'POST', '/admin/keys/rotate', {
    key: 'test-admin-key-0123456789',
    body: { purpose: 'receipt' },
  });
  assert.is(r.status, 200, r.text);
  const after = (await call(gw.url, 'GET', '/.well-known/ctl-keys.json')).body.keys;
  assert.is(after.find((k: any) => k.kid === oldReceiptKid).status, 'retired');
  assert.is(after.find((k: any) => k.kid === r.body.kid).status, 'active');
  const s = await createSession(gw);
  await proxy(gw, s.sessionToken, `${merchant.url}/k`, { purpose: 'api:search' });
  const rc = await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey });
  assert.is(rc.body.receipts[0].keyId, r.body.kid, 'new receipts are signed with the new key');
});

test.run();
