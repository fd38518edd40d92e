/**
 * The Human-Agent profile at the authority (PROTOCOL.md §10), through HTTP on the real app, on
 * SQLite and on PostgreSQL: enrolment, the two-step grant signed by the person's did:key, Trust
 * Bundles listing enrolled humans by scope, and revocation signed by the DID without an API key.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  generateKeyPair,
  didKeyFromJwk,
  didKeyUrl,
  signPreparedGrant,
  createSignedRevocation,
  createSignedSessionBudgetAuthorization,
  verifyCtl,
  importSigningKey,
  signedBytes,
  base64urlEncode,
  formatTimestamp,
  type PolicyGrant,
} from '../../src/index.js';
import { startTestAuthority, type TestAuthority } from './harness.js';
import { PG_URL, dropSchema, freshSchema, pgAvailable } from '../service-kit/pg-fixture.js';

const P384 = 'did:key:z82Lm1MpAkeJcix9K8TMiLd5NMAhnwkjjCBeWHXyu3U4oT2MVJJKXkcVBgjGhnLBn2Kaau9';
const isError = (r: { status: number; body: any }, status: number, code: string) => {
  assert.is(r.status, status, JSON.stringify(r.body));
  assert.is(r.body?.error?.code, code, JSON.stringify(r.body));
};

async function scenario(t: TestAuthority) {
  const person = await generateKeyPair({ alg: 'ES256' });
  const other = await generateKeyPair();
  const agent = await generateKeyPair();
  const did = didKeyFromJwk(person.publicJwk);
  const otherDid = didKeyFromJwk(other.publicJwk);

  // Enrolment: admin only, DIDs checked, labels without control characters.
  isError(await t.call('POST', '/humans', { did }, null), 401, 'unauthorized');
  isError(await t.call('POST', '/humans', { did: 'did:key:zBAD0' }), 400, 'malformed');
  isError(await t.call('POST', '/humans', { did: P384 }), 400, 'unsupported_algorithm');
  isError(await t.call('POST', '/humans', { did, label: 'a\u0007b' }), 400, 'malformed');
  isError(await t.call('POST', '/humans', { did, extra: 1 }), 400, 'malformed');
  const enrolled = await t.call('POST', '/humans', { did, label: 'Alex', scope: { category: 'travel' } });
  assert.is(enrolled.status, 201, JSON.stringify(enrolled.body));
  assert.equal(enrolled.body.scope, { category: 'travel' });
  isError(await t.call('POST', '/humans', { did }), 409, 'conflict');
  assert.is((await t.call('POST', '/humans', { did: otherDid, label: 'Sam' })).status, 201);
  const listed = await t.call('GET', '/humans');
  assert.equal(listed.body.humans.map((h: any) => h.did).sort(), [did, otherDid].sort());
  isError(await t.call('GET', '/humans', undefined, null), 401, 'unauthorized');

  // Two-step grant: prepared without an API key for an enrolled DID only.
  const request = {
    issuer: did,
    actorKey: agent.publicJwk,
    maxAmountMinor: '2000',
    currency: 'EUR',
    allowedPurposes: ['travel:booking'],
    expiresAt: formatTimestamp(Date.now() + 3600_000),
  };
  isError(
    await t.call('POST', '/grants/human/prepare', { ...request, issuer: didKeyFromJwk(agent.publicJwk) }, null),
    403,
    'issuer_not_trusted',
  );
  isError(
    await t.call('POST', '/grants/human/prepare', { ...request, maxAmountMinor: '20.00' }, null),
    400,
    'malformed',
  );
  isError(
    await t.call('POST', '/grants/human/prepare', { ...request, expiresAt: '2020-01-01T00:00:00Z' }, null),
    400,
    'malformed',
  );
  const prep = await t.call('POST', '/grants/human/prepare', request, null);
  assert.is(prep.status, 201, JSON.stringify(prep.body));
  const prepared = prep.body.grant;
  assert.is(prepared.profile, 'human-agent');
  assert.is(prepared.keyId, didKeyUrl(did));
  assert.is(prepared.revocationUrl, `${t.url}/revoke?grantId=${prepared.grantId}`);
  assert.not.ok('signature' in prepared);

  // Only the prepared object, unchanged, signed by that DID, is accepted.
  const raised = await signPreparedGrant({ ...prepared, maxAmountMinor: '200000' }, person.privateKeyPem);
  isError(await t.call('POST', '/grants', raised, null), 409, 'conflict');
  const signer = await importSigningKey(other.privateKeyPem);
  const forged = { ...prepared, signature: base64urlEncode(await signer.sign(signedBytes('grant', prepared))) };
  isError(await t.call('POST', '/grants', forged, null), 401, 'grant_signature_invalid');
  const grant: PolicyGrant = await signPreparedGrant(prepared, person.privateKeyPem);
  const submitted = await t.call('POST', '/grants', grant, null);
  assert.is(submitted.status, 201, JSON.stringify(submitted.body));
  assert.equal(submitted.body, grant);
  isError(await t.call('POST', '/grants', grant, null), 409, 'conflict');
  isError(await t.call('POST', '/grants', { ...grant, grantId: 'grant_never_prepared' }, null), 404, 'not_found');
  // An ordinary grant request still needs its API key.
  isError(await t.call('POST', '/grants', { policyHash: 'a'.repeat(64) }, null), 401, 'unauthorized');
  const custody = await t.call('GET', `/grants/${grant.grantId}`);
  assert.equal(custody.body.grant, grant);
  assert.equal((await t.call('GET', `/revoke?grantId=${grant.grantId}`, undefined, null)).body, {
    grantId: grant.grantId,
    revoked: false,
  });

  // Trust Bundles list the person where their scope matches, with the DID's key.
  const rootPublicKeyPem = (await t.authority.keys.rootSigner()).publicKeyPem;
  const expiresAt = formatTimestamp(Date.now() + 86_400_000);
  const travel = (await t.call('POST', '/trust-bundles', { scope: { category: 'travel' }, expiresAt })).body;
  const ev = (await t.call('POST', '/trust-bundles', { scope: { category: 'ev' }, expiresAt })).body;
  const issuersOf = (b: any) => b.issuers.map((i: any) => i.issuer);
  assert.ok(issuersOf(travel).includes(did) && issuersOf(travel).includes(otherDid), JSON.stringify(issuersOf(travel)));
  assert.ok(
    !issuersOf(ev).includes(did) && issuersOf(ev).includes(otherDid),
    'Alex is scoped to travel; Sam to every bundle',
  );
  const entry = travel.issuers.find((i: any) => i.issuer === did);
  assert.equal(entry.keys, [{ ...person.publicJwk, kid: didKeyUrl(did), alg: 'ES256', purposes: ['grant'] }]);
  const sba = await createSignedSessionBudgetAuthorization(
    {
      grant,
      sessionId: 'sess-1',
      actorId: 'assistant',
      maxAmountMinor: '1200',
      merchantId: 'hotel.example',
      rail: 'x402',
      purpose: 'travel:booking',
    },
    { signingKey: agent.privateKeyPem },
  );
  const pay = { amount: '1200', currency: 'EUR', merchantId: 'hotel.example', rail: 'x402', purpose: 'travel:booking' };
  assert.ok(
    (await verifyCtl(sba, { ...pay, offline: true, trustBundles: [travel], rootPublicKeyPem })).valid,
    'offline through the bundle',
  );
  const refusedEv = await verifyCtl(sba, { ...pay, offline: true, trustBundles: [ev], rootPublicKeyPem });
  assert.is(!refusedEv.valid && refusedEv.error.code, 'issuer_not_trusted');
  assert.ok(
    (await verifyCtl(sba, { ...pay, trustedHumans: [did], revocationTtl: 0 })).valid,
    'online through the revocation URL',
  );

  // Revocation signed by the DID, no API key; only the issuing DID; fresh; idempotent.
  const byOther = await createSignedRevocation({ grantId: grant.grantId }, { signingKey: other.privateKeyPem });
  isError(await t.call('POST', '/revoke', byOther, null), 403, 'forbidden');
  const stale = await createSignedRevocation(
    { grantId: grant.grantId, issuedAt: formatTimestamp(Date.now() - 3600_000) },
    { signingKey: person.privateKeyPem },
  );
  isError(await t.call('POST', '/revoke', stale, null), 401, 'unauthorized');
  const good = await createSignedRevocation({ grantId: grant.grantId }, { signingKey: person.privateKeyPem });
  isError(await t.call('POST', '/revoke', { ...good, grantId: 'grant_other' }, null), 401, 'unauthorized');
  isError(await t.call('POST', '/revoke', { ...good, note: 'x' }, null), 400, 'malformed');
  const revoked = await t.call('POST', '/revoke', good, null);
  assert.is(revoked.status, 200, JSON.stringify(revoked.body));
  assert.is(revoked.body.revoked, true);
  const replayed = await t.call('POST', '/revoke', good, null);
  assert.equal(replayed.body, revoked.body, 'a replay repeats the same answer');
  const after = await verifyCtl(sba, { ...pay, trustedHumans: [did], revocationTtl: 0 });
  assert.is(!after.valid && after.error.code, 'grant_revoked');
  const rebundled = (await t.call('POST', '/trust-bundles', { scope: { category: 'travel' }, expiresAt })).body;
  assert.ok(rebundled.revokedGrants.includes(grant.grantId));
  const audit = await t.call('GET', '/audit?limit=1000');
  const actions = audit.body.entries
    .filter((e: any) => e.subject === grant.grantId)
    .map((e: any) => `${e.action}:${e.actor}`);
  assert.equal(actions, [`grant.issue:${did}`, `grant.revoke:${did}`], JSON.stringify(audit.body).slice(0, 400));

  // Removing a person revokes what they issued and stops new drafts.
  const p2 = await t.call('POST', '/grants/human/prepare', { ...request, issuer: otherDid }, null);
  const g2 = await signPreparedGrant(p2.body.grant, other.privateKeyPem);
  assert.is((await t.call('POST', '/grants', g2, null)).status, 201);
  isError(await t.call('DELETE', `/humans/${otherDid}`, undefined, null), 401, 'unauthorized');
  const removed = await t.call('DELETE', `/humans/${otherDid}`);
  assert.is(removed.status, 200, JSON.stringify(removed.body));
  assert.equal(removed.body.revokedGrants, [g2.grantId]);
  assert.is((await t.call('GET', `/revoke?grantId=${g2.grantId}`, undefined, null)).body.revoked, true);
  isError(
    await t.call('POST', '/grants/human/prepare', { ...request, issuer: otherDid }, null),
    403,
    'issuer_not_trusted',
  );
  const again = await t.call('DELETE', `/humans/${otherDid}`);
  assert.equal(again.body, { did: otherDid, removedAt: removed.body.removedAt, revokedGrants: [] }, 'idempotent');
  isError(await t.call('DELETE', `/humans/${didKeyFromJwk(agent.publicJwk)}`), 404, 'not_found');
  isError(await t.call('DELETE', '/humans/not-a-did'), 400, 'malformed');
  assert.ok(
    (await t.call('GET', '/humans?includeRemoved=true')).body.humans.some(
      (h: any) => h.did === otherDid && h.removedAt,
    ),
  );
  // Enrolled again later: a new enrolment, listed again.
  assert.is((await t.call('POST', '/humans', { did: otherDid })).status, 201);
}

test('sqlite: enrol, prepare, sign, submit, bundle, revoke, remove', async () => {
  const t = await startTestAuthority();
  try {
    await scenario(t);
  } finally {
    await t.close();
  }
});

async function preparedOnOneSignedAtAnother(a: TestAuthority, b: TestAuthority) {
  const person = await generateKeyPair();
  const agent = await generateKeyPair();
  const did = didKeyFromJwk(person.publicJwk);
  assert.is((await a.call('POST', '/humans', { did })).status, 201);
  const auditBefore = (await a.call('GET', '/audit?limit=1000')).body.entries.length;
  const req = {
    issuer: did,
    actorKey: agent.publicJwk,
    maxAmountMinor: '100',
    currency: 'EUR',
    expiresAt: formatTimestamp(Date.now() + 3600_000),
  };
  const prepared = (await a.call('POST', '/grants/human/prepare', req, null)).body.grant;
  for (let i = 0; i < 5; i++) assert.is((await a.call('POST', '/grants/human/prepare', req, null)).status, 201);
  // Nothing written by the unauthenticated step: no policy, no audit entry.
  isError(await a.call('GET', `/policies/${prepared.policyHash}`), 404, 'not_found');
  assert.is((await a.call('GET', '/audit?limit=1000')).body.entries.length, auditBefore);
  const grant = await signPreparedGrant(prepared, person.privateKeyPem);
  const r = await b.call('POST', '/grants', grant, null);
  assert.is(r.status, 201, JSON.stringify(r.body));
  assert.equal((await b.call('GET', `/policies/${prepared.policyHash}`)).body.policy, {
    profile: 'human-agent',
    issuer: did,
    actorKey: agent.publicJwk,
    maxAmountMinor: '100',
    currency: 'EUR',
    expiresAt: req.expiresAt,
    allowedRails: ['x402'],
    allowedAssets: [{ standard: 'iso4217', code: 'EUR' }],
  });
}

test('sqlite: prepare writes nothing (no API key there); the draft is recognised when signed', async () => {
  const t = await startTestAuthority();
  try {
    await preparedOnOneSignedAtAnother(t, t);
  } finally {
    await t.close();
  }
});

test('a prepared grant signed after 15 minutes is refused; a revocation from a clock an hour off too', async () => {
  let clock = Date.now();
  const t = await startTestAuthority({ now: () => clock });
  try {
    const person = await generateKeyPair();
    const did = didKeyFromJwk(person.publicJwk);
    await t.call('POST', '/humans', { did });
    const req = {
      issuer: did,
      actorKey: (await generateKeyPair()).publicJwk,
      maxAmountMinor: '100',
      currency: 'EUR',
      expiresAt: formatTimestamp(clock + 86_400_000),
    };
    const late = await signPreparedGrant(
      (await t.call('POST', '/grants/human/prepare', req, null)).body.grant,
      person.privateKeyPem,
    );
    const onTime = await signPreparedGrant(
      (await t.call('POST', '/grants/human/prepare', req, null)).body.grant,
      person.privateKeyPem,
    );
    clock += 15 * 60_000 + 1000;
    const r = await t.call('POST', '/grants', late, null);
    isError(r, 409, 'conflict');
    assert.match(r.body.error.message, /not signed within 15 minutes/);
    clock -= 2000;
    assert.is((await t.call('POST', '/grants', onTime, null)).status, 201, 'inside the window');
    const rev = await createSignedRevocation(
      { grantId: onTime.grantId },
      { signingKey: person.privateKeyPem, now: () => clock - 3600_000 },
    );
    isError(await t.call('POST', '/revoke', rev, null), 401, 'unauthorized');
    const future = await createSignedRevocation(
      { grantId: onTime.grantId },
      { signingKey: person.privateKeyPem, now: () => clock + 3600_000 },
    );
    isError(await t.call('POST', '/revoke', future, null), 401, 'not_yet_valid');
    const fresh = await createSignedRevocation(
      { grantId: onTime.grantId },
      { signingKey: person.privateKeyPem, now: () => clock + 30_000 },
    );
    assert.is((await t.call('POST', '/revoke', fresh, null)).status, 200, 'thirty seconds ahead is within the slack');
  } finally {
    await t.close();
  }
});

if (await pgAvailable()) {
  test('postgres: the same story on a shared database', async () => {
    const schema = freshSchema();
    const t = await startTestAuthority({ databaseUrl: PG_URL, schema });
    try {
      await scenario(t);
    } finally {
      await t.close();
      await dropSchema(schema);
    }
  });
  test('postgres: a grant prepared by one instance is accepted by another on the same database', async () => {
    const schema = freshSchema();
    const a = await startTestAuthority({ databaseUrl: PG_URL, schema });
    // Both instances share one revocation base, as behind one load balancer.
    const b = await startTestAuthority({ databaseUrl: PG_URL, schema, env: { CTL_REVOCATION_BASE_URL: a.url } });
    try {
      await preparedOnOneSignedAtAnother(a, b);
    } finally {
      await a.close();
      await b.close();
      await dropSchema(schema);
    }
  });
} else console.log(`SKIPPED postgres: ${PG_URL} is unreachable`);

test.run();
