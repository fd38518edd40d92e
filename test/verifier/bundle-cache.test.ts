// PROTOCOL.md §12 "verify what you trust, every time": a verifier may cache an answer for an
// artifact's bytes, never for a JavaScript object. Each test verifies an object once, edits it in
// place, and checks that the edit cannot buy what the signed bytes do not say.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  createMemorySpendStorage,
  createSession,
  generateKeyPair,
  verifyCtl,
  formatTimestamp,
  type SignedBudgetAuthorization,
  type TrustBundle,
} from '../../src/index.js';
import { verifyCtlEdge } from '../../src/edge.js';
import { createBundleCache } from '../../src/verifier/bundle-cache.js';
import { bundleSignersWith } from '../../src/verifier/root-chain.js';
import { defaultCrypto } from '../../src/crypto/index.js';
import type { CtlCrypto } from '../../src/crypto/types.js';
import { keys, grant, bundle, rotatedKeyBundle, fakeAuthority, T0, HOUR, type Keys } from '../helpers/fixtures.js';

let k: Keys;
test.before(async () => {
  k = await keys();
});

async function signedSba(signer: Keys = k): Promise<SignedBudgetAuthorization> {
  const g = await grant(signer);
  const s = createSession(g, {
    actorId: 'vehicle-42',
    signingKey: k.actor.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now: () => T0,
  });
  return s.createSba({ amount: '30', currency: 'USD', rail: 'x402', merchantId: 'merchant-a', purpose: 'api:search' });
}

// Offline, a verifier records each budgetId it accepts (PROTOCOL.md §12): a fresh ledger per call lets these
// tests present one SBA many times, since what they compare is the bundle handling, not replay.
const offline = () => ({
  amount: '30',
  currency: 'USD',
  merchantId: 'merchant-a',
  offline: true,
  rootPublicKeyPem: k.root.publicKeyPem,
  now: () => T0,
  spendStorage: createMemorySpendStorage(),
});
const code = (r: Awaited<ReturnType<typeof verifyCtl>>) => (r.valid ? 'valid' : r.error.code);

for (const [name, verify] of [
  ['verifyCtl', verifyCtl],
  ['verifyCtlEdge', verifyCtlEdge],
] as const) {
  test(`${name}: emptying a verified bundle's revokedGrants in place does not unrevoke`, async () => {
    const sba = await signedSba();
    for (const edit of [
      (b: TrustBundle) => {
        b.revokedGrants.length = 0;
      },
      (b: TrustBundle) => {
        b.revokedGrants = [];
      },
      (b: TrustBundle) => {
        b.revokedGrants[0] = 'grant_someone_else';
      },
    ]) {
      const b = await bundle(k, { revokedGrants: [sba.grant.grantId] });
      assert.is(code(await verify(sba, { ...offline(), trustBundles: [b] })), 'grant_revoked');
      edit(b);
      const r = await verify(sba, { ...offline(), trustBundles: [b] });
      assert.ok(['grant_revoked', 'trust_bundle_invalid'].includes(code(r)), `after the edit: ${code(r)}`);
    }
  });

  test(`${name}: moving a verified bundle's expiresAt in place does not extend it`, async () => {
    const sba = await signedSba();
    const b = await bundle(k, { expiresAt: formatTimestamp(T0 + HOUR) });
    assert.is(code(await verify(sba, { ...offline(), trustBundles: [b] })), 'valid');
    b.expiresAt = formatTimestamp(T0 + 48 * HOUR);
    const later = { ...offline(), now: () => T0 + 2 * HOUR, trustBundles: [b] };
    const r = await verify(sba, later);
    assert.ok(['trust_bundle_expired', 'trust_bundle_invalid'].includes(code(r)), `after the edit: ${code(r)}`);
  });

  test(`${name}: a key slipped into a verified bundle's issuers[].keys is not trusted`, async () => {
    const evil = await generateKeyPair({ alg: 'EdDSA' });
    // A grant for the same issuer and kid, signed by a key the root never vouched for.
    const forged = await signedSba({ ...k, authority: evil });
    for (const edit of [
      (b: TrustBundle) => {
        b.issuers[0]!.keys[0]!.x = evil.publicJwk.x;
      },
      (b: TrustBundle) => {
        b.issuers[0]!.keys.unshift({
          ...evil.publicJwk,
          kid: k.authorityKid,
          alg: 'EdDSA',
          purposes: ['grant'],
        } as never);
      },
      (b: TrustBundle) => {
        b.issuers[0]!.keys = [{ ...evil.publicJwk, kid: k.authorityKid, alg: 'EdDSA', purposes: ['grant'] } as never];
      },
    ]) {
      const b = await bundle(k);
      assert.is(code(await verify(await signedSba(), { ...offline(), trustBundles: [b] })), 'valid');
      assert.is(code(await verify(forged, { ...offline(), trustBundles: [b] })), 'grant_signature_invalid');
      edit(b);
      const r = await verify(forged, { ...offline(), trustBundles: [b] });
      assert.is.not(code(r), 'valid');
    }
  });

  test(`${name}: moving a verified bundle to another scope in place does not revive a dropped key`, async () => {
    const sba = await signedSba();
    const old = await bundle(k, { sequence: 1 });
    const newer = await rotatedKeyBundle(k);
    assert.is(code(await verify(sba, { ...offline(), trustBundles: [old, newer] })), 'unknown_key');
    old.scope.category = 'somewhere-else';
    assert.is.not(code(await verify(sba, { ...offline(), trustBundles: [old, newer] })), 'valid');
    old.scope = { region: 'eu' };
    assert.is.not(code(await verify(sba, { ...offline(), trustBundles: [old, newer] })), 'valid');
  });

  test(`${name}: a bundle object replaced in place by a newer signed bundle is verified afresh`, async () => {
    const sba = await signedSba();
    const b = await bundle(k);
    assert.is(code(await verify(sba, { ...offline(), trustBundles: [b] })), 'valid');
    Object.assign(b, await bundle(k, { sequence: 2, revokedGrants: [sba.grant.grantId] }));
    assert.is(code(await verify(sba, { ...offline(), trustBundles: [b] })), 'grant_revoked');
  });

  test(`${name}: the same bundle as JSON text, a fresh parse or a frozen object verifies alike`, async () => {
    const sba = await signedSba();
    const b = await bundle(k, { revokedGrants: ['grant_other'] });
    const text = JSON.stringify(b);
    for (let i = 0; i < 2; i++) {
      assert.is(code(await verify(sba, { ...offline(), trustBundles: [text] })), 'valid');
      assert.is(code(await verify(sba, { ...offline(), trustBundles: [JSON.parse(text)] })), 'valid');
      assert.is(code(await verify(sba, { ...offline(), trustBundles: [Object.freeze(JSON.parse(text))] })), 'valid');
    }
    const revoking = JSON.stringify(await bundle(k, { sequence: 2, revokedGrants: [sba.grant.grantId] }));
    assert.is(code(await verify(sba, { ...offline(), trustBundles: [revoking] })), 'grant_revoked');
    const tampered = text.replace('grant_other', sba.grant.grantId);
    assert.is(code(await verify(sba, { ...offline(), trustBundles: [tampered] })), 'trust_bundle_invalid');
  });

  test(
    `${name}: a hostile bundle object (throwing getters, a revoked Proxy) is unreadable, ` + 'never a throw',
    async () => {
      const sba = await signedSba();
      const b = await bundle(k);
      assert.is(code(await verify(sba, { ...offline(), trustBundles: [b] })), 'valid');
      let reads = 0;
      Object.defineProperty(b, 'revokedGrants', {
        get() {
          if (++reads > 1) throw new Error('boom');
          return [];
        },
        enumerable: true,
      });
      const r = await verify(sba, { ...offline(), trustBundles: [b] });
      assert.is.not(code(r), 'valid');
      const { proxy, revoke } = Proxy.revocable(await bundle(k), {});
      revoke();
      assert.is(code(await verify(sba, { ...offline(), trustBundles: [proxy] })), 'issuer_not_trusted');
    },
  );
}

/** The default facade, counting bundle-signature checks (one `verifyWithJwk` each). */
function countingCrypto() {
  const calls = { verify: 0 };
  const c: CtlCrypto = {
    ...defaultCrypto,
    verifyWithJwk: (...args) => (calls.verify++, defaultCrypto.verifyWithJwk(...args)),
  };
  return { c, calls };
}

test('createBundleCache: an unchanged object is verified once and read from a deep-frozen private copy', async () => {
  const { c, calls } = countingCrypto();
  const cache = createBundleCache(c);
  const root = await bundleSignersWith(c, k.root.publicKeyPem);
  const b = await bundle(k, { revokedGrants: ['grant_a', 'grant_b'] });
  const first = await cache.check(b, root);
  const again = await cache.check(b, root);
  assert.ok(first && first.signatureOk && again === first);
  assert.is(calls.verify, 1, 'one signature check for the same, unchanged object');
  assert.is.not(first.bundle, b);
  assert.ok(
    Object.isFrozen(first.bundle) && Object.isFrozen(first.bundle.revokedGrants) && Object.isFrozen(first.bundle.scope),
  );
  assert.ok(
    Object.isFrozen(first.bundle.issuers[0]!.keys[0]!) && Object.isFrozen(first.bundle.issuers[0]!.keys[0]!.purposes),
  );
  assert.ok(first.revoked.has('grant_b'));
  b.revokedGrants.pop();
  const edited = await cache.check(b, root);
  assert.is(calls.verify, 2, 'an edited object is verified again');
  assert.ok(edited && !edited.signatureOk);
  assert.equal([...first.bundle.revokedGrants], ['grant_a', 'grant_b'], 'the earlier copy is untouched');
  const text = JSON.stringify(await bundle(k));
  const t1 = await cache.check(text, root);
  const t2 = await cache.check(text, root);
  assert.ok(t1 && t1.signatureOk && t2 === t1 && Object.isFrozen(t1.bundle.issuers));
  assert.is(calls.verify, 3, 'JSON text is remembered by its bytes');
  const other = await cache.check(text, await bundleSignersWith(c, k.authority.publicKeyPem));
  assert.ok(other && !other.signatureOk, 'another root is another check');
  for (const junk of [undefined, null, 42, 'not json', '{"version":1}', [], { version: 1 }])
    assert.is(await cache.check(junk, root), undefined);
  const cyclic: Record<string, unknown> = { ...(await bundle(k)) };
  cyclic['scope'] = cyclic;
  assert.is(await cache.check(cyclic, root), undefined);
});

test.run();
