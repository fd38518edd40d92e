import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  createSession,
  verifyCtl,
  createMemorySpendStorage,
  encodeSbaHeader,
  decodeSbaHeader,
  verifySignedSessionBudgetAuthorizationForDecision,
  verifyTrustBundle,
  formatTimestamp,
  type SignedBudgetAuthorization,
} from '../../src/index.js';
import { verifyCtlEdge } from '../../src/edge.js';
import {
  keys,
  grant,
  bundle,
  rotatedKeyBundle,
  fakeAuthority,
  authorityJwks,
  T0,
  HOUR,
  type Keys,
} from '../helpers/fixtures.js';
import { withFreshLedger } from '../helpers/fresh-ledger.js';

let k: Keys;
test.before(async () => {
  k = await keys();
});

async function signedSba(over: Parameters<typeof grant>[1] = {}, amount = '30', signingKey = k.actor.privateKeyPem) {
  const g = await grant(k, over);
  const s = createSession(g, { actorId: 'vehicle-42', signingKey, fetch: fakeAuthority(k).fetch, now: () => T0 });
  return s.createSba({ amount, currency: 'USD', rail: 'x402', merchantId: 'merchant-a', purpose: 'api:search' });
}

// A fresh ledger per call: offline, a verifier records every budgetId it accepts (PROTOCOL.md §12), and most
// tests here present one SBA several times to compare verdicts. The replay tests pass their own storage.
const base = () => ({
  amount: '30',
  currency: 'USD',
  merchantId: 'merchant-a',
  now: () => T0,
  spendStorage: createMemorySpendStorage(),
});

test('online: JWKS + revocation URL, both cached; revoked → grant_revoked at the next check', async () => {
  const sba = await signedSba();
  const a = fakeAuthority(k);
  let now = T0;
  const opts = {
    ...base(),
    jwksUrl: 'https://authority.test/.well-known/ctl-keys.json',
    fetch: a.fetch,
    now: () => now,
    revocationTtl: 60_000,
  };
  assert.ok((await verifyCtl(sba, opts)).valid);
  assert.ok((await verifyCtl(sba, opts)).valid);
  assert.is(a.state.calls, 1, 'revocation answer cached');
  assert.is(a.state.jwksCalls, 1, 'JWKS cached');
  a.revoke(sba.grant.grantId);
  assert.ok((await verifyCtl(sba, opts)).valid, 'still cached within the TTL (spec §8)');
  now += 60_000;
  const r = await verifyCtl(sba, opts);
  assert.equal(r, { valid: false, error: { code: 'grant_revoked', message: 'the grant is revoked' } });
});

test('online check fails closed: revocation_unavailable', async () => {
  const sba = await signedSba();
  const a = fakeAuthority(k);
  a.state.fail = true;
  const r = await verifyCtl(sba, { ...base(), signingKeyPem: k.authority.publicKeyPem, fetch: a.fetch });
  assert.is(!r.valid && r.error.code, 'revocation_unavailable');
  const none = await verifyCtl(sba, {
    ...base(),
    signingKeyPem: k.authority.publicKeyPem,
    fetch: undefined as never,
    offline: false,
  });
  assert.ok(!none.valid);
});

test('offline with a Trust Bundle: revoked grants refused after the next bundle refresh only (spec §3)', async () => {
  const sba = await signedSba();
  const b1 = await bundle(k);
  const opts = withFreshLedger({ ...base(), offline: true, rootPublicKeyPem: k.root.publicKeyPem });
  assert.ok((await verifyCtl(sba, { ...opts, trustBundles: [b1] })).valid);
  const b2 = await bundle(k, { sequence: 2, revokedGrants: [sba.grant.grantId] });
  const r = await verifyCtl(sba, { ...opts, trustBundles: [b2] });
  assert.is(!r.valid && r.error.code, 'grant_revoked');
  const expired = await bundle(k, { expiresAt: formatTimestamp(T0 - 1), issuedAt: formatTimestamp(T0 - HOUR) });
  const e = await verifyCtl(sba, { ...opts, trustBundles: [expired] });
  assert.is(!e.valid && e.error.code, 'trust_bundle_expired');
  const noRoot = await verifyCtl(sba, { ...base(), offline: true, trustBundles: [b1] });
  assert.is(!noRoot.valid && noRoot.error.code, 'malformed');
});

test('JWKS: unknown kid and wrong purpose', async () => {
  const sba = await signedSba();
  const jwks = authorityJwks(k);
  const r1 = await verifyCtl(sba, { ...base(), offline: true, jwks: { keys: [{ ...jwks.keys[0]!, kid: 'other' }] } });
  assert.is(!r1.valid && r1.error.code, 'unknown_key');
  const r2 = await verifyCtl(sba, {
    ...base(),
    offline: true,
    jwks: { keys: [{ ...jwks.keys[0]!, purposes: ['receipt'] }] },
  });
  assert.is(!r2.valid && r2.error.code, 'key_purpose_mismatch');
  const r3 = await verifyCtl(sba, { ...base(), offline: true, jwks });
  assert.ok(r3.valid);
});

test('trackSpend: the same SBA twice is replay; cumulative spend stays within the grant', async () => {
  const storage = createMemorySpendStorage();
  const opts = {
    ...base(),
    offline: true,
    signingKeyPem: k.authority.publicKeyPem,
    trackSpend: true,
    spendStorage: storage,
  };
  const g = await grant(k, { maxAmountMinor: '100' });
  const s = createSession(g, {
    actorId: 'v',
    signingKey: k.actor.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now: () => T0,
  });
  const sbas: SignedBudgetAuthorization[] = [];
  for (let i = 0; i < 3; i++)
    sbas.push(await s.createSba({ amount: '30', currency: 'USD', rail: 'x402', merchantId: 'merchant-a' }));
  const results = await Promise.all([sbas[0], sbas[0], sbas[0], sbas[1]].map((x) => verifyCtl(x, opts)));
  assert.is(results.filter((r) => r.valid).length, 2);
  assert.is(results.filter((r) => !r.valid && r.error.code === 'replay').length, 2);
  assert.ok((await verifyCtl(sbas[2], opts)).valid);
  assert.is(await storage.total(`grant:${g.grantId}`), 90n);
  // A fourth SBA from a second wallet on the same grant would pass the grant's ceiling.
  const other = createSession(g, {
    actorId: 'v2',
    signingKey: k.actor.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now: () => T0,
  });
  const over = await verifyCtl(await other.createSba({ amount: '30', currency: 'USD', rail: 'x402' }), opts);
  assert.is(!over.valid && over.error.code, 'budget_exceeded');
  // A payment refused for another reason records nothing.
  const wrongMerchant = await verifyCtl(await other.createSba({ amount: '5', currency: 'USD', rail: 'x402' }), {
    ...opts,
    merchantId: 'merchant-z',
    amount: '5',
  });
  assert.is(!wrongMerchant.valid && wrongMerchant.error.code, 'destination_not_allowed');
  assert.is(await storage.total(`grant:${g.grantId}`), 90n);
});

test('offline allowance (PROTOCOL.md §8): count, amount and bundle age bound an offline terminal', async () => {
  const g = await grant(k, { offline: { maxPayments: 2, maxAmountMinor: '50', maxBundleAgeMs: HOUR } });
  let now = T0;
  const s = createSession(g, {
    actorId: 'v',
    signingKey: k.actor.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now: () => now,
  });
  const b = await bundle(k);
  const storage = createMemorySpendStorage();
  const opts = {
    currency: 'USD',
    offline: true,
    trustBundles: [b],
    rootPublicKeyPem: k.root.publicKeyPem,
    spendStorage: storage,
    now: () => T0,
  };
  const pay = async (amount: string) =>
    verifyCtl(await s.createSba({ amount, currency: 'USD', rail: 'card' }), { ...opts, amount });
  assert.ok((await pay('20')).valid);
  const over = await pay('31');
  assert.is(!over.valid && over.error.code, 'offline_limit_exceeded', 'amount allowance');
  assert.ok((await pay('30')).valid);
  const third = await pay('1');
  assert.is(!third.valid && third.error.code, 'offline_limit_exceeded', '(n+1)-th payment');
  now = T0 + 2 * HOUR;
  const stale = await verifyCtl(await s.createSba({ amount: '1', currency: 'USD', rail: 'card' }), {
    ...opts,
    amount: '1',
    spendStorage: createMemorySpendStorage(),
    now: () => now,
  });
  assert.is(!stale.valid && stale.error.code, 'offline_limit_exceeded', 'bundle too old for this grant');
});

test('intentHash: required in the Full profile, bound to the payment', async () => {
  const sba = await signedSba();
  const opts = withFreshLedger({
    ...base(),
    offline: true,
    signingKeyPem: k.authority.publicKeyPem,
    requireIntentHash: true,
  });
  assert.ok((await verifyCtl(sba, opts)).valid);
  // Presented for another payment: refused by what differs, not as a malformed SBA.
  const cheaper = await verifyCtl(sba, { ...opts, amount: '29' });
  assert.is(!cheaper.valid && cheaper.error.code, 'amount_exceeds_authorization');
  const elsewhere = await verifyCtl(sba, { ...opts, merchantId: 'merchant-b' });
  assert.is(!elsewhere.valid && elsewhere.error.code, 'destination_not_allowed');
  const g = await grant(k);
  const s = createSession(g, {
    actorId: 'v',
    signingKey: k.actor.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now: () => T0,
  });
  const noIntent = await verifyCtl(await s.createSba({ amount: '30', currency: 'USD', rail: 'x402' }), opts);
  assert.is(!noIntent.valid && noIntent.error.code, 'malformed');
});

test('presentation: Authorization: CTL <base64> round-trips; 16 KiB cap', async () => {
  const sba = await signedSba();
  const header = encodeSbaHeader(sba);
  assert.ok(header.startsWith('CTL '));
  assert.equal(decodeSbaHeader(header), JSON.parse(JSON.stringify(sba)));
  const url = 'CTL ' + Buffer.from(JSON.stringify(sba)).toString('base64url');
  assert.equal(decodeSbaHeader(url), JSON.parse(JSON.stringify(sba)));
  assert.throws(() => decodeSbaHeader('CTL ' + 'A'.repeat(17000)), /16 KiB/);
  assert.throws(() => decodeSbaHeader('Bearer abc'), /CTL/);
});

test('edge verifier (WebCrypto only) gives the same answers', async () => {
  const sba = await signedSba();
  const opts = withFreshLedger({ ...base(), offline: true, signingKeyPem: k.authority.publicKeyPem });
  assert.ok((await verifyCtlEdge(sba, opts)).valid);
  const tampered = structuredClone(sba);
  tampered.authorization.maxAmountMinor = '31';
  const r = await verifyCtlEdge(tampered, { ...opts, amount: '31' });
  assert.is(!r.valid && r.error.code, 'sba_signature_invalid');
  const p = await signedSba({ actorKey: k.actorP256.publicJwk }, '30', k.actorP256.privateKeyPem);
  assert.ok((await verifyCtlEdge(p, opts)).valid, 'a P-256 actor on WebCrypto');
  const swapped = { ...p, signature: sba.signature };
  const s2 = await verifyCtlEdge(swapped, opts);
  assert.is(!s2.valid && s2.error.code, 'sba_signature_invalid');
  // Verify-only, as ctl/verify: the authority's private key is no grant key here (ctl derives its public half).
  const priv = await verifyCtlEdge(sba, { ...opts, signingKeyPem: k.authority.privateKeyPem });
  assert.is(!priv.valid && priv.error.code, 'grant_signature_invalid');
  assert.ok(
    (await verifyCtl(sba, { ...opts, signingKeyPem: k.authority.privateKeyPem })).valid,
    'ctl takes the public half of a private key',
  );
});

test('decision-bound verification (spec §4.4)', async () => {
  const sba = await signedSba({}, '30');
  const a = sba.authorization;
  const decision = {
    action: 'ALLOW',
    reasons: [],
    policyHash: a.policyHash,
    expiresAtISO: formatTimestamp(T0 + 60_000),
    decisionId: 'd1',
    sessionGrantId: a.grantId,
    priceFiat: { amountMinor: '30', currency: 'USD' },
  };
  const opts = {
    sessionId: a.sessionId,
    decision,
    offline: true,
    signingKeyPem: k.authority.publicKeyPem,
    merchantId: 'merchant-a',
    now: () => T0,
  };
  const ok = await verifySignedSessionBudgetAuthorizationForDecision(sba, opts);
  assert.ok(ok.ok, JSON.stringify(ok));
  const deny = await verifySignedSessionBudgetAuthorizationForDecision(sba, {
    ...opts,
    decision: { ...decision, action: 'DENY' },
  });
  assert.ok(!deny.ok);
  const spent = await verifySignedSessionBudgetAuthorizationForDecision(sba, { ...opts, cumulativeSpentMinor: '1' });
  assert.is(!spent.ok && spent.error.code, 'budget_exceeded');
  const otherPolicy = await verifySignedSessionBudgetAuthorizationForDecision(sba, {
    ...opts,
    decision: { ...decision, policyHash: 'f'.repeat(64) },
  });
  assert.is(!otherPolicy.ok && otherPolicy.error.code, 'policy_hash_mismatch');
});

test('verifyTrustBundle: rollback and JSON text input', async () => {
  const b = await bundle(k, { sequence: 5 });
  assert.ok((await verifyTrustBundle(JSON.stringify(b), k.root.publicKeyPem, { now: () => T0, minSequence: 5 })).valid);
  const r = await verifyTrustBundle(b, k.root.publicKeyPem, { now: () => T0, minSequence: 6 });
  assert.is(!r.valid && r.error.code, 'trust_bundle_rollback');
  const w = await verifyTrustBundle(b, k.authority.publicKeyPem, { now: () => T0 });
  assert.is(!w.valid && w.error.code, 'trust_bundle_invalid');
});

test('the hot-path SBA bytes equal signedBytes("sba") with and without issuer', async () => {
  const { sbaSignedText } = await import('../../src/artifacts/sba.js');
  const { signedBytes, canonicalize, utf8Encode } = await import('../../src/index.js');
  const sba = await signedSba();
  assert.equal(utf8Encode(sbaSignedText(sba, canonicalize(sba.grant))), signedBytes('sba', sba as never));
  const withIssuer = { ...sba, issuer: sba.grant.issuer };
  assert.equal(utf8Encode(sbaSignedText(withIssuer, canonicalize(sba.grant))), signedBytes('sba', withIssuer as never));
});

test('merchant-side velocity with trackSpend; verifyPolicyGrant on its own', async () => {
  const { verifyPolicyGrant } = await import('../../src/index.js');
  const g = await grant(k, { velocity: { maxPaymentsPerHour: 2 } });
  const s = createSession(g, {
    actorId: 'v',
    signingKey: k.actor.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now: () => T0,
  });
  const opts = {
    ...base(),
    offline: true,
    signingKeyPem: k.authority.publicKeyPem,
    trackSpend: true,
    spendStorage: createMemorySpendStorage(),
  };
  const sbas = [];
  for (let i = 0; i < 2; i++)
    sbas.push(await s.createSba({ amount: '30', currency: 'USD', rail: 'x402', merchantId: 'merchant-a' }));
  // A second wallet on the same grant (its own storage) can sign a third; the merchant refuses it.
  const other = createSession(g, {
    actorId: 'v2',
    signingKey: k.actor.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now: () => T0,
  });
  sbas.push(await other.createSba({ amount: '30', currency: 'USD', rail: 'x402', merchantId: 'merchant-a' }));
  const results = [];
  for (const x of sbas) results.push(await verifyCtl(x, opts));
  assert.equal(
    results.map((r) => (r.valid ? 'ok' : r.error.code)),
    ['ok', 'ok', 'velocity_exceeded'],
  );
  assert.ok((await verifyPolicyGrant(g, { publicKey: k.authority.publicKeyPem, now: () => T0 })).valid);
  assert.ok((await verifyPolicyGrant(JSON.stringify(g), { jwks: authorityJwks(k), now: () => T0 })).valid);
  const wrong = await verifyPolicyGrant(g, { publicKey: k.root.publicKeyPem, now: () => T0 });
  assert.is(!wrong.valid && wrong.error.code, 'grant_signature_invalid');
  const late = await verifyPolicyGrant(g, { publicKey: k.authority.publicKeyPem, now: () => T0 + 25 * HOUR });
  assert.is(!late.valid && late.error.code, 'grant_expired');
});

test('Trust Bundles: per scope only the newest counts, so an old bundle cannot keep a dropped key alive', async () => {
  const { createTrustBundle } = await import('../../src/index.js');
  const sba = await signedSba();
  const old = await bundle(k, { sequence: 1 });
  const newer = await rotatedKeyBundle(k);
  const opts = withFreshLedger({ ...base(), offline: true, rootPublicKeyPem: k.root.publicKeyPem });
  assert.ok((await verifyCtl(sba, { ...opts, trustBundles: [old] })).valid);
  for (const order of [
    [old, newer],
    [newer, old],
  ]) {
    const r = await verifyCtl(sba, { ...opts, trustBundles: order });
    assert.is(!r.valid && r.error.code, 'unknown_key');
  }
  // Another scope's bundle still vouches on its own.
  const otherScope = await createTrustBundle(
    {
      sequence: 1,
      scope: { region: 'eu' },
      revokedGrants: [],
      issuers: [{ issuer: 'authority.test', keys: authorityJwks(k).keys }],
      issuedAt: formatTimestamp(T0 - 1000),
      expiresAt: formatTimestamp(T0 + 24 * HOUR),
    },
    { signingKey: k.root.privateKeyPem, issuer: 'root.test' },
  );
  assert.ok((await verifyCtl(sba, { ...opts, trustBundles: [newer, otherScope] })).valid);
});

test('the grant signature cache never vouches for a tampered grant carrying a cached signature', async () => {
  const sba = await signedSba();
  const opts = withFreshLedger({ ...base(), offline: true, signingKeyPem: k.authority.publicKeyPem });
  assert.ok((await verifyCtl(sba, opts)).valid);
  const tampered = structuredClone(sba);
  tampered.grant.maxAmountMinor = '9999999';
  const r = await verifyCtl(tampered, opts);
  assert.is(!r.valid && r.error.code, 'grant_signature_invalid');
  assert.ok((await verifyCtl(sba, opts)).valid, 'the genuine grant still verifies');
  const other = await verifyCtl(sba, { ...opts, signingKeyPem: k.root.publicKeyPem });
  assert.is(!other.valid && other.error.code, 'grant_signature_invalid', 'cached under one key, not under another');
});

test(
  'a grant text seen before skips only its own re-check: a changed grant or a bad authorization ' + 'is still refused',
  async () => {
    const sba = await signedSba();
    const opts = withFreshLedger({ ...base(), offline: true, signingKeyPem: k.authority.publicKeyPem });
    assert.ok((await verifyCtl(sba, opts)).valid); // its grant text is now remembered
    const code = async (v: unknown) => {
      const r = await verifyCtl(v, opts);
      return !r.valid && r.error;
    };
    // Same signature, another text: checked in full (an unknown member, a null, a wrong prototype).
    const extra = { ...sba, grant: { ...sba.grant, extra: 1 } };
    assert.equal(await code(extra), { code: 'malformed', message: 'sba.grant: unknown member "extra"' });
    const nulled = { ...sba, grant: { ...sba.grant, destinationAllowlist: null } };
    assert.is(((await code(nulled)) as { code: string }).code, 'malformed');
    const odd = { ...sba, grant: Object.assign(Object.create({ inherited: true }), sba.grant) };
    assert.is(((await code(odd)) as { code: string }).code, 'malformed');
    // A known signature on an object graph that shares one child at every level (2^40 leaves):
    // no match with the grant seen before (the walk stops at the first difference), then refused by
    // the full check before any JCS, never expanded.
    let shared: unknown = 'x402';
    for (let i = 0; i < 40; i++) shared = [shared, shared];
    const exploding = { ...sba, grant: { ...sba.grant, allowedRails: shared } };
    assert.is(((await code(exploding)) as { code: string }).code, 'malformed');
    // A member of the signed text hidden (non-enumerable) and one the issuer never signed added:
    // not the grant seen before, so checked in full and refused, as a fresh verifier refuses it: a
    // hidden member is absent (canonicalize would not write it), and this one is required.
    const hiding = structuredClone(sba);
    const url = hiding.grant.revocationUrl;
    delete (hiding.grant as { revocationUrl?: string }).revocationUrl;
    Object.defineProperty(hiding.grant, 'revocationUrl', { value: url, enumerable: false });
    (hiding.grant as unknown as Record<string, unknown>).velocity = { maxPaymentsPerHour: 1000000 };
    assert.equal(await code(hiding), { code: 'malformed', message: 'sba.grant: missing member "revocationUrl"' });
    // Same grant text, a defective authorization: the authorization is checked every time.
    const auth = { ...sba, authorization: { ...sba.authorization, budgetScope: 'FOREVER' } };
    assert.is(((await code(auth)) as { code: string }).code, 'malformed');
    assert.ok((await verifyCtl(sba, opts)).valid);
  },
);

test.run();
