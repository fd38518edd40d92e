/**
 * Owners apart from their API keys: an owner has any number of keys, its sessions stay reachable
 * with any of them; disabling the owner stops its keys and revokes its live sessions in one
 * transaction; the admin can stop any session, recorded as the admin's. Runs on SQLite, and on
 * PostgreSQL when CTL_GATEWAY_TEST_PG=1 (owners-pg.test.ts).
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
  ADMIN_KEY,
  inOneHour,
  type TestGateway,
  type Merchant,
  type TestDb,
} from './helpers.js';

const PG = process.env.CTL_GATEWAY_TEST_PG === '1';
let db: TestDb | undefined;
let gw: TestGateway;
let merchant: Merchant;

test.before(async () => {
  db = PG ? await postgresDb('gateway owners on PostgreSQL') : sqliteDb();
  if (!db) return;
  gw = await startTestGateway(db);
  merchant = await startMerchant({ amount: '100' });
});
test.after(async () => {
  if (!db) return;
  await gw.close();
  await merchant.close();
  await db.drop();
});

const admin = (method: string, path: string, body?: unknown) => call(gw.url, method, path, { key: ADMIN_KEY, body });
async function newOwner(label = 'o') {
  const res = await admin('POST', '/admin/owners', { label });
  assert.is(res.status, 201, res.text);
  return res.body as { ownerId: string; keyId: string; apiKey: string; label: string };
}
const sessionOf = (apiKey: string, config: Record<string, unknown> = {}) =>
  createSession({ ...gw, ownerKey: apiKey }, config);
const bundleGrants = async () =>
  (await call(gw.url, 'GET', '/.well-known/ctl-trust-bundle.json')).body.revokedGrants as string[];

test('POST /admin/owners answers { ownerId, keyId, apiKey }; a second key reaches the same sessions', async () => {
  if (!db) return;
  const o = await newOwner('rotating');
  assert.type(o.ownerId, 'string');
  assert.type(o.keyId, 'string');
  assert.is.not(o.ownerId, o.keyId, 'the owner is not its key');
  assert.ok(o.apiKey.includes(o.keyId), 'the key id is the one inside the key');
  const k2 = await admin('POST', `/admin/owners/${o.ownerId}/keys`);
  assert.is(k2.status, 201, k2.text);
  assert.is(k2.body.ownerId, o.ownerId);
  assert.is.not(k2.body.keyId, o.keyId);
  const s = await sessionOf(o.apiKey);
  // Rotation: the old key is revoked, the new one still sees and controls the session.
  const rk = await admin('DELETE', `/admin/owners/${o.ownerId}/keys/${o.keyId}`);
  assert.is(rk.status, 200, rk.text);
  assert.equal(rk.body, { ownerId: o.ownerId, keyId: o.keyId, revoked: true });
  assert.is((await call(gw.url, 'GET', '/sessions', { key: o.apiKey })).status, 401, 'the revoked key stops');
  const seen = (await admin('GET', `/admin/owners/${o.ownerId}`)).body;
  assert.is(seen.disabled, false);
  assert.equal(
    seen.keys.map((k: { keyId: string; revoked: boolean }) => [k.keyId, k.revoked]).sort(),
    [
      [o.keyId, true],
      [k2.body.keyId, false],
    ].sort(),
  );
  assert.not.ok(JSON.stringify(seen).includes('hash'), 'no key material');
  const list = await call(gw.url, 'GET', '/sessions', { key: k2.body.apiKey });
  assert.equal(
    list.body.sessions.map((x: { sessionId: string }) => x.sessionId),
    [s.sessionId],
  );
  const stop = await call(gw.url, 'DELETE', `/sessions/${s.sessionId}`, { key: k2.body.apiKey });
  assert.is(stop.status, 200);
  assert.is(stop.body.state, 'revoked');
  assert.is(stop.body.revokedBy, 'owner');
  // A key of another owner does not reach it; unknown owner / key are 404.
  const other = await newOwner('other');
  assert.is((await call(gw.url, 'GET', `/sessions/${s.sessionId}`, { key: other.apiKey })).status, 404);
  assert.is(
    (await admin('DELETE', `/admin/owners/${other.ownerId}/keys/${k2.body.keyId}`)).status,
    404,
    "another owner's key",
  );
  assert.is((await admin('POST', '/admin/owners/nosuchowner/keys')).status, 404);
  assert.is((await admin('DELETE', `/admin/owners/${o.ownerId}/keys/nosuchkey`)).status, 404);
  // Only the admin manages keys.
  assert.is((await call(gw.url, 'POST', `/admin/owners/${o.ownerId}/keys`, { key: k2.body.apiKey })).status, 403);
});

test(
  'DELETE /admin/owners/:id: every key stops, every live session is revoked at once ' +
    '(payment, /revoke, bundle, event)',
  async () => {
    if (!db) return;
    const o = await newOwner('leaving');
    const k2 = (await admin('POST', `/admin/owners/${o.ownerId}/keys`)).body;
    const a = await sessionOf(o.apiKey);
    const b = await sessionOf(k2.apiKey);
    const done = await sessionOf(o.apiKey);
    assert.is((await call(gw.url, 'DELETE', `/sessions/${done.sessionId}`, { key: o.apiKey })).status, 200);
    assert.is(
      (await proxy(gw, a.sessionToken, `${merchant.url}/x`, { purpose: 'api:search' })).status,
      200,
      'it pays before',
    );
    const bystander = await sessionOf(gw.ownerKey);

    const before = gw.events.length;
    const res = await admin('DELETE', `/admin/owners/${o.ownerId}`);
    assert.is(res.status, 200, res.text);
    assert.equal(res.body, { ownerId: o.ownerId, disabled: true, revoked: true, revokedSessions: 2 });

    for (const key of [o.apiKey, k2.apiKey]) assert.is((await call(gw.url, 'GET', '/sessions', { key })).status, 401);
    const seen = (await admin('GET', `/admin/owners/${o.ownerId}`)).body;
    assert.is(seen.disabled, true);
    assert.ok(
      seen.keys.every((k: { revoked: boolean }) => k.revoked),
      'every key marked revoked',
    );
    for (const s of [a, b]) {
      const pay = await proxy(gw, s.sessionToken, `${merchant.url}/x`, { purpose: 'api:search' });
      assert.is(pay.status, 410, pay.text);
      assert.is(pay.body.error.code, 'session_revoked');
      const rv = await call(gw.url, 'GET', `/revoke?grantId=${s.grantId}`);
      assert.is(rv.body.revoked, true);
      assert.type(rv.body.revokedAt, 'string');
    }
    const grants = await bundleGrants();
    for (const s of [a, b, done]) assert.ok(grants.includes(s.grantId), `the bundle lists ${s.grantId}`);
    assert.not.ok(grants.includes(bystander.grantId));
    assert.is(
      (await proxy(gw, bystander.sessionToken, `${merchant.url}/x`, { purpose: 'api:search' })).status,
      200,
      "another owner's session goes on",
    );

    const revokedEvents = gw.events.slice(before).filter((e) => e.type === 'session.revoked');
    assert.equal(revokedEvents.map((e) => e.data.sessionId).sort(), [a.sessionId, b.sessionId].sort());
    for (const e of revokedEvents) {
      assert.is(e.data.revokedBy, 'admin');
      assert.is(e.data.reason, 'owner_disabled');
    }
    // Repeated: still 200, nothing more to revoke; no new key for a disabled owner.
    assert.equal((await admin('DELETE', `/admin/owners/${o.ownerId}`)).body.revokedSessions, 0);
    const late = await admin('POST', `/admin/owners/${o.ownerId}/keys`);
    assert.is(late.status, 409);
    assert.is(late.body.error.code, 'conflict');
    assert.is((await admin('DELETE', '/admin/owners/nosuchowner')).status, 404);
  },
);

test('DELETE /admin/sessions/:id: the admin stops any session, recorded as the admin did it', async () => {
  if (!db) return;
  const s = await sessionOf(gw.ownerKey);
  const before = gw.events.length;
  const res = await admin('DELETE', `/admin/sessions/${s.sessionId}`);
  assert.is(res.status, 200, res.text);
  assert.is(res.body.state, 'revoked');
  assert.is(res.body.revokedBy, 'admin');
  const ev = gw.events.slice(before).filter((e) => e.type === 'session.revoked');
  assert.is(ev.length, 1);
  assert.is(ev[0]!.data.sessionId, s.sessionId);
  assert.is(ev[0]!.data.revokedBy, 'admin');
  assert.type(ev[0]!.data.revokedAt, 'string');
  const pay = await proxy(gw, s.sessionToken, `${merchant.url}/x`, { purpose: 'api:search' });
  assert.is(pay.body.error.code, 'session_revoked');
  assert.ok((await bundleGrants()).includes(s.grantId));
  // The owner sees who stopped it; repeated calls answer the same and emit nothing more.
  assert.is((await call(gw.url, 'GET', `/sessions/${s.sessionId}`, { key: gw.ownerKey })).body.revokedBy, 'admin');
  assert.is((await admin('DELETE', `/admin/sessions/${s.sessionId}`)).status, 200);
  assert.is(gw.events.slice(before).filter((e) => e.type === 'session.revoked').length, 1);
  assert.is((await admin('DELETE', '/admin/sessions/sess_nosuch')).status, 404);
  assert.is(
    (await call(gw.url, 'DELETE', `/admin/sessions/${s.sessionId}`, { key: gw.ownerKey })).status,
    403,
    'owners use DELETE /sessions/:id',
  );
});

test("GET /admin/owners/:id/sessions: the admin sees an owner's sessions, paged, and only that owner's", async () => {
  if (!db) return;
  const a = await newOwner('listed');
  const b = await newOwner('other');
  const mine = [];
  for (let i = 0; i < 3; i++) mine.push((await sessionOf(a.apiKey, { label: `s${i}` })).sessionId);
  await sessionOf(b.apiKey);
  const first = await admin('GET', `/admin/owners/${a.ownerId}/sessions?limit=2`);
  assert.is(first.status, 200, first.text);
  assert.is(first.body.ownerId, a.ownerId);
  assert.equal(
    first.body.sessions.map((s: { sessionId: string }) => s.sessionId),
    [mine[2], mine[1]],
    'newest first',
  );
  const rest = await admin('GET', `/admin/owners/${a.ownerId}/sessions?limit=2&cursor=${first.body.nextCursor}`);
  assert.equal(
    rest.body.sessions.map((s: { sessionId: string }) => s.sessionId),
    [mine[0]],
  );
  assert.is(rest.body.nextCursor, undefined);
  assert.is((await admin('GET', '/admin/owners/own_nosuch/sessions')).status, 404);
  assert.is((await admin('GET', `/admin/owners/${a.ownerId}/sessions?limit=0`)).body.error.code, 'malformed');
  assert.is(
    (await call(gw.url, 'GET', `/admin/owners/${a.ownerId}/sessions`, { key: a.apiKey })).status,
    403,
    "an owner key is not the admin's",
  );
});

test('a session created while its owner is disabled never stays live', async () => {
  if (!db) return;
  const o = await newOwner('racing');
  const body = { budget: { amount: '1000', currency: 'USD' }, purposes: ['api:search'], expiresAt: inOneHour() };
  const creates = Array.from({ length: 12 }, () => call(gw.url, 'POST', '/sessions', { key: o.apiKey, body }));
  const disabled = admin('DELETE', `/admin/owners/${o.ownerId}`);
  const results = await Promise.all(creates);
  assert.is((await disabled).status, 200);
  for (const r of results) assert.ok(r.status === 201 || r.status === 401, `${r.status} ${r.text}`);
  const live = await gw.db.all(`SELECT id FROM gw_sessions WHERE owner_id = ? AND state IN ('active', 'paused')`, [
    o.ownerId,
  ]);
  assert.equal(live, []);
});

test.run();
