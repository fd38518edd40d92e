// The Human-Agent profile in the SDK (PROTOCOL.md §10): a person's did:key signs the grant, the
// agent's session key signs SBAs, a merchant verifies offline (bundle) or online (revocation URL).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  generateKeyPair,
  createSignedPolicyGrant,
  createSignedSessionBudgetAuthorization,
  createTrustBundle,
  createSession,
  createSignedRevocation,
  verifySignedRevocation,
  signPreparedGrant,
  verifyPolicyGrant,
  verifyCtl,
  didKeyFromJwk,
  didKeyUrl,
  formatTimestamp,
  policyHash,
  parseGrant,
  CtlError,
  type PolicyGrant,
} from '../../src/index.js';
import { HOUR, T0, fakeAuthority, keys } from '../helpers/fixtures.js';

const now = () => T0;
async function rejects(fn: () => Promise<unknown>, check: (e: unknown) => boolean) {
  try {
    await fn();
  } catch (e) {
    return assert.ok(check(e), String(e));
  }
  assert.unreachable('did not throw');
}

async function setup(alg: 'EdDSA' | 'ES256' = 'EdDSA') {
  const human = await generateKeyPair({ alg });
  const agent = await generateKeyPair({ alg: 'EdDSA' });
  const root = await generateKeyPair({ alg: 'EdDSA' });
  const did = didKeyFromJwk(human.publicJwk);
  const grant = await createSignedPolicyGrant(
    {
      profile: 'human-agent',
      policyHash: policyHash({ delegate: 'travel' }),
      actorKey: agent.publicJwk,
      allowedRails: ['x402'],
      allowedAssets: [{ standard: 'iso4217', code: 'EUR' }],
      allowedPurposes: ['travel:booking'],
      maxAmountMinor: '2000',
      currency: 'EUR',
      expiresAt: formatTimestamp(T0 + 24 * HOUR),
      issuedAt: formatTimestamp(T0 - 1000),
    },
    { signingKey: human.privateKeyPem, revocationBaseUrl: 'https://authority.test' },
  );
  const sba = (over: Record<string, unknown> = {}) =>
    createSignedSessionBudgetAuthorization(
      {
        grant,
        sessionId: 'sess-1',
        actorId: 'assistant',
        maxAmountMinor: '1200',
        merchantId: 'hotel.example',
        rail: 'x402',
        purpose: 'travel:booking',
        issuedAt: formatTimestamp(T0 - 500),
        ...over,
      } as any,
      { signingKey: agent.privateKeyPem, now },
    );
  const bundle = (issuers: any[], revokedGrants: string[] = []) =>
    createTrustBundle(
      {
        sequence: 1,
        scope: { category: 'travel' },
        issuers,
        revokedGrants,
        issuedAt: formatTimestamp(T0 - 1000),
        expiresAt: formatTimestamp(T0 + HOUR),
      },
      { signingKey: root.privateKeyPem, issuer: 'root.test' },
    );
  const entry = { issuer: did, keys: [{ ...human.publicJwk, kid: didKeyUrl(did), alg, purposes: ['grant'] }] };
  return { human, agent, root, did, grant, sba, bundle, entry };
}

const pay = {
  amount: '1200',
  currency: 'EUR',
  merchantId: 'hotel.example',
  rail: 'x402',
  purpose: 'travel:booking',
  now,
};

for (const alg of ['EdDSA', 'ES256'] as const) {
  test(`${alg}: a human grant names its DID and verifies through trustedHumans, online`, async () => {
    const s = await setup(alg);
    assert.is(s.grant.profile, 'human-agent');
    assert.is(s.grant.issuer, s.did);
    assert.is(s.grant.keyId, `${s.did}#${s.did.slice(8)}`);
    assert.ok(s.did.startsWith(alg === 'EdDSA' ? 'did:key:z6Mk' : 'did:key:zDn'));
    assert.equal(parseGrant(JSON.stringify(s.grant)), s.grant);
    assert.ok((await verifyPolicyGrant(s.grant, { now })).valid, 'self-certifying signature');
    const a = fakeAuthority(await keys());
    const r = await verifyCtl(await s.sba(), { ...pay, trustedHumans: [s.did], fetch: a.fetch as any });
    assert.ok(r.valid, JSON.stringify(r));
    assert.is(a.state.calls, 1, 'the revocation URL was asked');
    a.revoke(s.grant.grantId);
    const again = await verifyCtl(await s.sba(), {
      ...pay,
      trustedHumans: [s.did],
      fetch: a.fetch as any,
      revocationTtl: 0,
    });
    assert.is(!again.valid && again.error.code, 'grant_revoked');
  });
}

test(
  'trust is not self-certifying: without trustedHumans or a bundle listing the DID, ' + 'issuer_not_trusted',
  async () => {
    const s = await setup();
    const other = await generateKeyPair();
    for (const o of [
      {},
      { trustedHumans: [didKeyFromJwk(other.publicJwk)] },
      { signingKeyPem: s.human.publicKeyPem },
    ]) {
      const r = await verifyCtl(await s.sba(), { ...pay, offline: true, ...o });
      assert.is(!r.valid && r.error.code, 'issuer_not_trusted', JSON.stringify(o));
    }
    // A bundle that lists someone else does not vouch for this person.
    const b = await s.bundle([
      {
        ...s.entry,
        issuer: didKeyFromJwk(other.publicJwk),
        keys: [
          { ...other.publicJwk, kid: didKeyUrl(didKeyFromJwk(other.publicJwk)), alg: 'EdDSA', purposes: ['grant'] },
        ],
      },
    ]);
    const r = await verifyCtl(await s.sba(), {
      ...pay,
      offline: true,
      trustBundles: [b],
      rootPublicKeyPem: s.root.publicKeyPem,
    });
    assert.is(!r.valid && r.error.code, 'issuer_not_trusted');
  },
);

test(
  'offline through a bundle listing the DID; its revokedGrants refuse; a bundle listing ' +
    'another key is unknown_key',
  async () => {
    const s = await setup();
    const o = { ...pay, offline: true, rootPublicKeyPem: s.root.publicKeyPem };
    assert.ok((await verifyCtl(await s.sba(), { ...o, trustBundles: [await s.bundle([s.entry])] })).valid);
    const revoked = await verifyCtl(await s.sba(), {
      ...o,
      trustBundles: [await s.bundle([s.entry], [s.grant.grantId])],
    });
    assert.is(!revoked.valid && revoked.error.code, 'grant_revoked');
    // trustedHumans with a bundle that does not list the DID: trusted, and the bundle's revocations still count.
    const listed = await verifyCtl(await s.sba(), {
      ...o,
      trustedHumans: [s.did],
      trustBundles: [await s.bundle([], [s.grant.grantId])],
    });
    assert.is(!listed.valid && listed.error.code, 'grant_revoked');
    const wrongKey = await generateKeyPair();
    const lying = await s.bundle([
      { ...s.entry, keys: [{ ...wrongKey.publicJwk, kid: s.grant.keyId, alg: 'EdDSA', purposes: ['grant'] }] },
    ]);
    const r = await verifyCtl(await s.sba(), { ...o, trustBundles: [lying] });
    assert.is(!r.valid && r.error.code, 'unknown_key');
    const noPurpose = await s.bundle([{ ...s.entry, keys: [{ ...s.entry.keys[0], purposes: ['sba'] }] }]);
    const p = await verifyCtl(await s.sba(), { ...o, trustBundles: [noPurpose] });
    assert.is(!p.valid && p.error.code, 'key_purpose_mismatch');
  },
);

test('intentHash is enforced under a human grant whatever the options say', async () => {
  const s = await setup();
  const o = { ...pay, offline: true, trustedHumans: [s.did], requireIntentHash: false };
  assert.ok((await verifyCtl(await s.sba(), o)).valid);
  const wrong = await verifyCtl(await s.sba(), { ...o, amount: '1100' });
  assert.is(!wrong.valid && wrong.error.code, 'amount_exceeds_authorization', 'a different amount than the intent');
  const otherMerchant = await verifyCtl(await s.sba(), { ...o, merchantId: 'other.example' });
  assert.is(
    !otherMerchant.valid && otherMerchant.error.code,
    'destination_not_allowed',
    'another merchant than the intent',
  );
  // An SBA without intentHash under a human grant is refused at parse, and the wallet will not sign one.
  await rejects(
    () => s.sba({ merchantId: undefined }),
    (e: unknown) => e instanceof CtlError && e.code === 'malformed',
  );
  const sba = await s.sba();
  delete (sba.authorization as any).intentHash;
  const r = await verifyCtl(sba, o);
  assert.is(!r.valid && r.error.code, 'malformed');
});

test(
  'the signed profile cannot be stripped or added: the signature covers it, and the ' + 'keyId must be the DID URL',
  async () => {
    const s = await setup();
    const stripped = { ...s.grant } as any;
    delete stripped.profile;
    assert.throws(
      () => parseGrant(stripped),
      (e: unknown) => e instanceof CtlError && e.code === 'malformed',
      'a DID URL keyId needs the profile',
    );
    const k = await keys();
    const plain = await createSignedPolicyGrant(
      {
        policyHash: s.grant.policyHash,
        actorKey: s.agent.publicJwk,
        allowedRails: ['x402'],
        allowedAssets: [{ standard: 'iso4217', code: 'EUR' }],
        maxAmountMinor: '10',
        currency: 'EUR',
        expiresAt: s.grant.expiresAt,
      },
      { issuer: 'authority.test', signingKey: k.authority.privateKeyPem, revocationBaseUrl: 'https://a.test', now },
    );
    assert.throws(
      () => parseGrant({ ...plain, profile: 'human-agent' }),
      (e: unknown) => e instanceof CtlError && e.code === 'malformed',
    );
    assert.throws(
      () => parseGrant({ ...s.grant, profile: 'human' }),
      (e: unknown) => e instanceof CtlError && e.code === 'malformed',
    );
    assert.throws(
      () => parseGrant({ ...s.grant, keyId: `${s.did}#z6Mkother` }),
      (e: unknown) => e instanceof CtlError && e.code === 'malformed',
    );
    // Raised ceiling, or signed by someone else under the person's DID: the DID's key does not verify it.
    const raised = await verifyPolicyGrant({ ...s.grant, maxAmountMinor: '999999' }, { now });
    assert.is(!raised.valid && raised.error.code, 'grant_signature_invalid');
    const mallory = await generateKeyPair();
    const byMallory = await createSignedPolicyGrant(
      { ...(s.grant as any), maxAmountMinor: '999999' },
      { signingKey: mallory.privateKeyPem },
    );
    const r = await verifyPolicyGrant({ ...byMallory, issuer: s.did, keyId: s.grant.keyId }, { now });
    assert.is(!r.valid && r.error.code, 'grant_signature_invalid');
    const sba = await s.sba();
    const m = await verifyCtl(
      { ...sba, grant: { ...byMallory, issuer: s.did, keyId: s.grant.keyId } },
      { ...pay, offline: true, trustedHumans: [s.did] },
    );
    assert.ok(!m.valid);
  },
);

test('signPreparedGrant signs exactly what was prepared, and only with the DID it names', async () => {
  const s = await setup();
  const { signature: _s, ...prepared } = s.grant;
  const again = await signPreparedGrant(prepared, s.human.privateKeyPem);
  assert.equal({ ...again, signature: '' }, { ...s.grant, signature: '' });
  assert.ok((await verifyPolicyGrant(again, { now })).valid);
  const other = await generateKeyPair();
  await rejects(
    () => signPreparedGrant(prepared, other.privateKeyPem),
    (e: unknown) => e instanceof RangeError,
  );
  await rejects(
    () => signPreparedGrant({ ...prepared, extra: 1 }, s.human.privateKeyPem),
    (e: unknown) => e instanceof CtlError && e.code === 'malformed',
  );
  await rejects(
    () =>
      createSignedPolicyGrant(
        { ...(prepared as any), profile: 'human-agent' },
        { signingKey: s.human.privateKeyPem, issuer: 'authority.test' },
      ),
    (e: unknown) => e instanceof RangeError,
  );
});

test('a wallet session under a human grant signs SBAs with intentHash that verify', async () => {
  const s = await setup();
  const session = createSession(s.grant, {
    actorId: 'assistant',
    signingKey: s.agent.privateKeyPem,
    ceiling: { amount: '2000', currency: 'EUR' },
    now,
    fetch: (async () => ({
      ok: true,
      status: 200,
      text: async () => JSON.stringify({ grantId: s.grant.grantId, revoked: false }),
    })) as any,
  });
  const sba = await session.createSba({
    amount: '1200',
    currency: 'EUR',
    rail: 'x402',
    merchantId: 'hotel.example',
    purpose: 'travel:booking',
  });
  assert.ok(sba.authorization.intentHash);
  assert.ok((await verifyCtl(sba, { ...pay, offline: true, trustedHumans: [s.did] })).valid);
});

test('ctl-revocation/1: signed by the DID, fresh, never replayable as another artifact', async () => {
  const s = await setup('ES256');
  const rev = await createSignedRevocation({ grantId: s.grant.grantId }, { signingKey: s.human.privateKeyPem, now });
  assert.equal(Object.keys(rev).sort(), ['grantId', 'issuedAt', 'issuer', 'keyId', 'signature', 'version']);
  assert.is(rev.issuer, s.did);
  assert.ok((await verifySignedRevocation(rev, { now })).valid);
  const stale = await verifySignedRevocation(rev, { now: () => T0 + 301_000 });
  assert.is(!stale.valid && stale.error.code, 'unauthorized');
  const future = await verifySignedRevocation(rev, { now: () => T0 - 60_000 });
  assert.is(!future.valid && future.error.code, 'not_yet_valid');
  const other = await generateKeyPair();
  const forged = {
    ...(await createSignedRevocation({ grantId: s.grant.grantId }, { signingKey: other.privateKeyPem, now })),
    issuer: s.did,
    keyId: s.grant.keyId,
  };
  const f = await verifySignedRevocation(forged, { now });
  assert.is(!f.valid && f.error.code, 'unauthorized');
  const moved = await verifySignedRevocation({ ...rev, grantId: 'grant_other' }, { now });
  assert.is(!moved.valid && moved.error.code, 'unauthorized');
  const extra = await verifySignedRevocation({ ...rev, reason: 'x' }, { now });
  assert.is(!extra.valid && extra.error.code, 'malformed');
  // A grant signature is not a revocation signature (type prefix, PROTOCOL.md §3).
  const asGrant = await verifySignedRevocation(
    {
      version: 1,
      grantId: s.grant.grantId,
      issuer: s.did,
      keyId: s.grant.keyId,
      issuedAt: s.grant.issuedAt,
      signature: s.grant.signature,
    },
    { now },
  );
  assert.ok(!asGrant.valid);
});

test.run();
