/**
 * A gateway session backed by a person's grant (PROTOCOL.md §10): the agent holds only the
 * session token, the gateway holds the key the person delegated to, the ceiling, purposes and
 * expiry are the person's, only a grant recorded at an authority the gateway trusts backs a
 * session, and the person's revocation at their authority stops the very next payment.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  createSignedPolicyGrant,
  didKeyFromJwk,
  generateKeyPair,
  importSigningKey,
  policyHash,
  signedBytes,
  base64urlEncode,
  verifyCtl,
  type PolicyGrant,
} from '../../src/index.js';
import { createAuditLog, verifyWebhook } from '../../service-kit/index.js';
import {
  call,
  proxy,
  sqliteDb,
  startMerchant,
  startTestGateway,
  inOneHour,
  type Merchant,
  type TestDb,
  type TestGateway,
} from './helpers.js';

let db: TestDb;
let gw: TestGateway;
let merchant: Merchant;
let authority: Server;
let authorityUrl: string;
const revoked = new Set<string>();
// The grants the authority recorded (an authority records a person's grant only while they are enrolled).
const recorded = new Set<string>();
let authorityAsked = 0;
const person = await generateKeyPair({ alg: 'ES256' });
const did = didKeyFromJwk(person.publicJwk);

test.before(async () => {
  // The person's authority, reduced to its revocation answer (spec §4.3 GET /revoke; 404 for a grant it never
  // recorded).
  authority = createServer((req, res) => {
    authorityAsked++;
    const id = new URL(req.url!, 'http://x').searchParams.get('grantId')!;
    if (!recorded.has(id))
      return res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"code":"not_found"}}');
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ grantId: id, revoked: revoked.has(id) }));
  });
  await new Promise<void>((r) => authority.listen(0, '127.0.0.1', r));
  authorityUrl = `http://127.0.0.1:${(authority.address() as AddressInfo).port}`;
  db = sqliteDb();
  gw = await startTestGateway(db, { humanAuthorities: [authorityUrl] });
  merchant = await startMerchant({ amount: '100' });
});
test.after(async () => {
  await gw.close();
  await merchant.close();
  await db.drop();
  authority.close();
});

async function personGrants(
  actorKey: unknown,
  over: Record<string, unknown> = {},
  o: { record?: boolean; signingKey?: string; base?: string } = {},
): Promise<PolicyGrant> {
  const grant = await createSignedPolicyGrant(
    {
      profile: 'human-agent',
      policyHash: policyHash({ delegate: 'search' }),
      actorKey: actorKey as any,
      allowedRails: ['ledger', 'x402'],
      allowedAssets: [{ standard: 'iso4217', code: 'USD' }],
      allowedPurposes: ['api:search'],
      maxAmountMinor: '250',
      currency: 'USD',
      expiresAt: inOneHour(),
      ...over,
    } as any,
    { signingKey: o.signingKey ?? person.privateKeyPem, revocationBaseUrl: o.base ?? authorityUrl },
  );
  if (o.record !== false) recorded.add(grant.grantId);
  return grant;
}

async function humanSession(over: Record<string, unknown> = {}, grantOver: Record<string, unknown> = {}) {
  const key = await call(gw.url, 'POST', '/sessions/human/keys', { key: gw.ownerKey });
  assert.is(key.status, 201, key.text);
  const grant = await personGrants(key.body.actorKey, grantOver);
  const res = await call(gw.url, 'POST', '/sessions', {
    key: gw.ownerKey,
    body: { humanGrant: grant, label: 'assistant', ...over },
  });
  return { key: key.body, grant, res };
}

test(
  'the gateway prepares a session key; the person delegates to it; the session carries ' + "the person's bounds",
  async () => {
    const { key, grant, res } = await humanSession();
    assert.ok(key.actorDid.startsWith('did:key:z6Mk') && key.actorKey.kty === 'OKP');
    assert.is(res.status, 201, res.text);
    assert.match(res.body.sessionToken, /^gw_sess_/);
    assert.is(res.body.grantId, grant.grantId);
    assert.is(res.body.issuer, did);
    const view = await call(gw.url, 'GET', `/sessions/${res.body.sessionId}`, { key: gw.ownerKey });
    assert.equal(view.body.budget, { amount: '250', currency: 'USD' });
    assert.equal(view.body.purposes, ['api:search']);
    assert.is(view.body.expiresAt, grant.expiresAt);
    assert.is(view.body.policyHash, grant.policyHash);

    // Two payments fit; receipts carry the SBA, which verifies end to end under the person's DID.
    for (let i = 0; i < 2; i++) {
      const paid = await proxy(gw, res.body.sessionToken, `${merchant.url}/search?q=${i}`, { purpose: 'api:search' });
      assert.is(paid.status, 200, paid.text);
    }
    const receipts = (await call(gw.url, 'GET', `/sessions/${res.body.sessionId}/receipts`, { key: gw.ownerKey })).body
      .receipts;
    assert.is(receipts.length, 2);
    const sba = receipts[0].sba;
    assert.is(sba.grant.issuer, did);
    assert.match(sba.authorization.intentHash, /^[0-9a-f]{64}$/);
    const v = await verifyCtl(sba, {
      amount: '100',
      currency: 'USD',
      merchantId: '127.0.0.1',
      trustedHumans: [did],
      offline: true,
    });
    assert.ok(v.valid, JSON.stringify(v));
    // The third would pass the person's 2.50 USD ceiling.
    const third = await proxy(gw, res.body.sessionToken, `${merchant.url}/search?q=3`, { purpose: 'api:search' });
    assert.is(third.body?.error?.code, 'budget_exceeded', third.text);
    // Another purpose than the person allowed is refused before anything is signed.
    const other = await proxy(gw, res.body.sessionToken, `${merchant.url}/shop`, { purpose: 'shopping:gifts' });
    assert.is(other.body?.error?.code, 'purpose_not_allowed', other.text);
    // The key was claimed: it backs no second session, nor does the grant.
    const again = await call(gw.url, 'POST', '/sessions', { key: gw.ownerKey, body: { humanGrant: grant } });
    assert.is(again.status, 409, again.text);
  },
);

test('a person-backed session is audited when created and signs its webhooks like any session', async () => {
  const received: Array<{ headers: Record<string, string>; body: string }> = [];
  const hook = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      received.push({ headers: req.headers as Record<string, string>, body });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => hook.listen(0, '127.0.0.1', r));
  try {
    const { res } = await humanSession({ webhookUrl: `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook` });
    assert.is(res.status, 201, res.text);
    assert.match(res.body.webhookSecret, /^whsec_/, 'the owner gets the secret its deliveries are signed with');
    assert.is(
      (await proxy(gw, res.body.sessionToken, `${merchant.url}/search?q=hook`, { purpose: 'api:search' })).status,
      200,
    );
    await gw.gw.idle();
    const completed = received
      .map((r) => {
        assert.ok(verifyWebhook(res.body.webhookSecret, r.headers, r.body), 'Standard Webhooks signature verifies');
        return JSON.parse(r.body) as { type: string; data: { sessionId: string } };
      })
      .filter((e) => e.type === 'payment.completed');
    assert.equal(
      completed.map((e) => e.data.sessionId),
      [res.body.sessionId],
    );
    const created = (await createAuditLog(gw.db, 'gw_audit_log').list()).filter(
      (e) => e.action === 'session.created' && e.subject === res.body.sessionId,
    );
    assert.is(created.length, 1, 'one session.created entry');
    assert.is(JSON.parse(created[0]!.data).issuer, did);
  } finally {
    await new Promise((r) => hook.close(r));
  }
});

test('the person revokes at their authority: the next payment is refused before it is paid', async () => {
  const { grant, res } = await humanSession();
  const paidBefore = merchant.paid.length;
  revoked.add(grant.grantId);
  const r = await proxy(gw, res.body.sessionToken, `${merchant.url}/search?q=r`, { purpose: 'api:search' });
  assert.is(r.body?.error?.code, 'grant_revoked', r.text);
  assert.is(merchant.paid.length, paidBefore, 'nothing paid');
  const view = await call(gw.url, 'GET', `/sessions/${res.body.sessionId}`, { key: gw.ownerKey });
  assert.is(view.body.spentMinor, '0');
  assert.is(view.body.reservedMinor, '0', 'the reservation was released');
  assert.ok(gw.events.some((e) => e.type === 'payment.denied' && e.data.code === 'grant_revoked'));
});

test('revoked while the session pays: the very next payment is refused (no cached answer)', async () => {
  const { grant, res } = await humanSession();
  assert.is(res.status, 201, res.text);
  const first = await proxy(gw, res.body.sessionToken, `${merchant.url}/search?q=before`, { purpose: 'api:search' });
  assert.is(first.status, 200, first.text);
  const paidBefore = merchant.paid.length;
  const asked = authorityAsked;
  revoked.add(grant.grantId);
  const next = await proxy(gw, res.body.sessionToken, `${merchant.url}/search?q=after`, { purpose: 'api:search' });
  assert.is(next.body?.error?.code, 'grant_revoked', next.text);
  assert.is(merchant.paid.length, paidBefore, 'nothing paid after the revocation');
  assert.ok(authorityAsked > asked, 'the authority was asked again');
});

test('a person not enrolled where the gateway trusts: refused at session creation', async () => {
  // Signed by a person the trusted authority never recorded a grant for (not enrolled there).
  const stranger = await generateKeyPair({ alg: 'ES256' });
  const key = (await call(gw.url, 'POST', '/sessions/human/keys', { key: gw.ownerKey })).body;
  const unenrolled = await personGrants(key.actorKey, {}, { record: false, signingKey: stranger.privateKeyPem });
  const r1 = await call(gw.url, 'POST', '/sessions', { key: gw.ownerKey, body: { humanGrant: unenrolled } });
  assert.is(r1.body?.error?.code, 'issuer_not_trusted', r1.text);
  // Refused, not unauthenticated: the owner's key was fine (gateway/README.md: 403).
  assert.is(r1.status, 403);
  assert.is(r1.headers.get('www-authenticate'), null);
  // Recorded by an authority the gateway was not told to trust (its own revocation URL).
  const elsewhere = await personGrants(key.actorKey, {}, { base: `${authorityUrl}/other` });
  const r2 = await call(gw.url, 'POST', '/sessions', { key: gw.ownerKey, body: { humanGrant: elsewhere } });
  assert.is(r2.body?.error?.code, 'issuer_not_trusted', r2.text);
  assert.is(r2.status, 403);
  // Revoked before the session was asked for.
  const gone = await personGrants(key.actorKey);
  revoked.add(gone.grantId);
  const r3 = await call(gw.url, 'POST', '/sessions', { key: gw.ownerKey, body: { humanGrant: gone } });
  assert.is(r3.body?.error?.code, 'grant_revoked', r3.text);
  // A gateway told to trust no authority accepts no person's grant.
  const db2 = sqliteDb();
  const none = await startTestGateway(db2);
  try {
    const k = (await call(none.url, 'POST', '/sessions/human/keys', { key: none.ownerKey })).body;
    const r = await call(none.url, 'POST', '/sessions', {
      key: none.ownerKey,
      body: { humanGrant: await personGrants(k.actorKey) },
    });
    assert.is(r.body?.error?.code, 'issuer_not_trusted', r.text);
  } finally {
    await none.close();
    await db2.drop();
  }
  // The key was not claimed by any refusal: the enrolled person's grant still gets its session.
  assert.is(
    (
      await call(gw.url, 'POST', '/sessions', {
        key: gw.ownerKey,
        body: { humanGrant: await personGrants(key.actorKey) },
      })
    ).status,
    201,
  );
});

test("a person's grant with budget windows is refused at creation: a session cannot enforce them yet", async () => {
  const { res } = await humanSession({}, { windows: [{ every: 'P1D', maxAmountMinor: '100' }] });
  assert.is(res.status, 501, res.text);
  assert.is(res.body?.error?.code, 'unsupported_feature');
  assert.match(res.body.error.message, /windows/);
});

test("a merchant outside the person's destination list is refused by the chain check", async () => {
  const { res } = await humanSession({}, { destinationAllowlist: ['shop.example'] });
  assert.is(res.status, 201, res.text);
  const r = await proxy(gw, res.body.sessionToken, `${merchant.url}/search?q=d`, { purpose: 'api:search' });
  assert.is(r.body?.error?.code, 'destination_not_allowed', r.text);
});

test(
  "refusals: owner-only, the person's bounds cannot be widened, forged or foreign grants, " + 'keys of another owner',
  async () => {
    const key = (await call(gw.url, 'POST', '/sessions/human/keys', { key: gw.ownerKey })).body;
    assert.is((await call(gw.url, 'POST', '/sessions/human/keys', {})).status, 401);
    const grant = await personGrants(key.actorKey);
    for (const extra of [
      { budget: { amount: '999999', currency: 'USD' } },
      { purposes: ['api:*'] },
      { expiresAt: '2099-01-01T00:00:00Z' },
      { softLimit: { amount: '100' } },
    ]) {
      const r = await call(gw.url, 'POST', '/sessions', { key: gw.ownerKey, body: { humanGrant: grant, ...extra } });
      assert.is(r.status, 400, `${JSON.stringify(extra)}: ${r.text}`);
    }
    const raised = await call(gw.url, 'POST', '/sessions', {
      key: gw.ownerKey,
      body: { humanGrant: { ...grant, maxAmountMinor: '999999' } },
    });
    assert.is(raised.body?.error?.code, 'grant_signature_invalid', raised.text);
    const stranger = await generateKeyPair();
    const s = await importSigningKey(stranger.privateKeyPem);
    const { signature: _s, ...unsigned } = grant;
    const forged = { ...unsigned, signature: base64urlEncode(await s.sign(signedBytes('grant', unsigned))) };
    assert.is(
      (await call(gw.url, 'POST', '/sessions', { key: gw.ownerKey, body: { humanGrant: forged } })).body?.error?.code,
      'grant_signature_invalid',
    );
    const noPurposes = await personGrants(key.actorKey, { allowedPurposes: undefined });
    assert.is(
      (await call(gw.url, 'POST', '/sessions', { key: gw.ownerKey, body: { humanGrant: noPurposes } })).status,
      400,
    );
    // A key the gateway never made, and a key of another owner.
    const own = await personGrants((await generateKeyPair()).publicJwk);
    assert.is((await call(gw.url, 'POST', '/sessions', { key: gw.ownerKey, body: { humanGrant: own } })).status, 409);
    const other = await call(gw.url, 'POST', '/admin/owners', {
      key: 'test-admin-key-0123456789',
      body: { label: 'other owner' },
    });
    const r = await call(gw.url, 'POST', '/sessions', { key: other.body.apiKey, body: { humanGrant: grant } });
    assert.is(r.status, 409, r.text);
    // Still usable by its owner afterwards.
    assert.is((await call(gw.url, 'POST', '/sessions', { key: gw.ownerKey, body: { humanGrant: grant } })).status, 201);
  },
);

test.run();
