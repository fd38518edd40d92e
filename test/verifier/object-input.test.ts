// PROTOCOL.md §12, verify what you trust: an SBA given as an object is read once, into data of its
// own, and only that is checked, verified and cached. A getter that answers differently from one
// read to the next, or a member hidden from the signed text (non-enumerable), must never make a
// verifier accept what the same SBA as JSON text would refuse, nor poison what it remembers.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  createMemorySpendStorage,
  createSession,
  createSignedSessionBudgetAuthorization,
  verifyCtl,
  verifyTrustBundle,
  type SignedBudgetAuthorization,
} from '../../src/index.js';
import { createVerifier } from '../../src/verifier/verify.js';
import { createCtlCrypto } from '../../src/crypto/index.js';
import { keys, grant, bundle, fakeAuthority, T0, type Keys } from '../helpers/fixtures.js';
import type { GrantFields } from '../../src/artifacts/grant.js';

let k: Keys;
test.before(async () => {
  k = await keys();
});

// A fresh ledger per call: these tests compare verdicts on one SBA, not replay (offline records each budgetId).
const base = () => ({
  currency: 'USD',
  merchantId: 'merchant-a',
  now: () => T0,
  signingKeyPem: k.authority.publicKeyPem,
  offline: true,
  spendStorage: createMemorySpendStorage(),
});
const outcome = (r: Awaited<ReturnType<typeof verifyCtl>>) => (r.valid ? 'valid' : r.error.code);

async function signedSba(over: Partial<GrantFields> = {}, purpose = 'api:search'): Promise<SignedBudgetAuthorization> {
  const g = await grant(k, over);
  const s = createSession(g, {
    actorId: 'v',
    signingKey: k.actor.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now: () => T0,
  });
  return s.createSba({ amount: '30', currency: 'USD', rail: 'x402', merchantId: 'merchant-a', purpose });
}

/** Makes `obj[key]` a getter that answers `honest` for its first `reads` reads, then `lie`; returns the read count. */
function twoFaced(obj: object, key: string, honest: unknown, lie: unknown, reads: number): () => number {
  let n = 0;
  Object.defineProperty(obj, key, { enumerable: true, configurable: true, get: () => (++n <= reads ? honest : lie) });
  return () => n;
}

test('a getter on the authorized amount is read once: a payment above it is never accepted', async () => {
  const sba = await signedSba();
  for (let honestReads = 1; honestReads <= 6; honestReads++) {
    const copy = structuredClone(sba);
    const reads = twoFaced(copy.authorization, 'maxAmountMinor', '30', '999999', honestReads);
    assert.is(
      outcome(await verifyCtl(copy, { ...base(), amount: '5000' })),
      'amount_exceeds_authorization',
      `honest for ${honestReads} reads`,
    );
    assert.is(reads(), 1, 'read once');
  }
});

test("a getter on the grant's destination list cannot let in a merchant the grant does not name", async () => {
  const sba = await signedSba({ destinationAllowlist: ['merchant-a'] });
  for (let honestReads = 1; honestReads <= 5; honestReads++) {
    const copy = structuredClone(sba);
    twoFaced(copy.grant, 'destinationAllowlist', ['merchant-a'], ['evil'], honestReads);
    assert.is.not(
      outcome(await verifyCtl(copy, { ...base(), amount: '30', merchantId: 'evil' })),
      'valid',
      `honest for ${honestReads} reads`,
    );
  }
});

test('a getter cannot poison the grant cache: the forged grant as JSON text is refused afterwards', async () => {
  // Signed by the actor under a grant whose allowedPurposes the authority never signed.
  const g = await grant(k, { allowedPurposes: ['api:search'] });
  const forged = { ...g, allowedPurposes: ['evil:*'] };
  const sba = await createSession(forged, {
    actorId: 'v',
    signingKey: k.actor.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now: () => T0,
  }).createSba({ amount: '30', currency: 'USD', rail: 'x402', merchantId: 'merchant-a', purpose: 'evil:steal' });
  const text = JSON.stringify(sba);
  const opts = { ...base(), amount: '30', purpose: 'evil:steal' };
  for (let honestRead = 1; honestRead <= 4; honestRead++) {
    const verify = createVerifier(createCtlCrypto('native'));
    const o = JSON.parse(text);
    // Shows the signed purposes on one read only, the forged ones on every other.
    let n = 0;
    Object.defineProperty(o.grant, 'allowedPurposes', {
      enumerable: true,
      get: () => (++n === honestRead ? ['api:search'] : ['evil:*']),
    });
    assert.is.not(outcome(await verify(o, opts)), 'valid', `object, honest on read ${honestRead}`);
    assert.is(
      outcome(await verify(text, opts)),
      'grant_signature_invalid',
      `then the text, honest on read ${honestRead}`,
    );
  }
});

test('a member hidden from the signed text (non-enumerable) is absent: the verdict is the JSON text’s', async () => {
  const sba = await signedSba({ allowedPurposes: undefined });
  const copy = structuredClone(sba);
  // The signed grant names no purposes (unrestricted); a hidden list would refuse this payment.
  Object.defineProperty(copy.grant, 'allowedPurposes', { value: ['other:*'], enumerable: false });
  const opts = () => ({ ...base(), amount: '30', purpose: 'api:search' });
  assert.is(outcome(await verifyCtl(copy, opts())), outcome(await verifyCtl(JSON.stringify(sba), opts())));
  assert.is(outcome(await verifyCtl(copy, opts())), 'valid');
});

test('a "__proto__" member stays a member: the object is refused as its JSON text is', async () => {
  const sba = await signedSba();
  const text = JSON.stringify(sba).replace('"authorization":{', '"authorization":{"__proto__":null,');
  const opts = { ...base(), amount: '30' };
  assert.is(outcome(await verifyCtl(text, opts)), 'malformed');
  // JSON.parse makes "__proto__" an own member too; a copy made by assignment would set the prototype instead and lose
  // it.
  assert.is(outcome(await verifyCtl(JSON.parse(text), opts)), 'malformed');
});

test(
  'a Trust Bundle is read once: a getter cannot show the signature its revocations and ' + 'the caller none',
  async () => {
    const signed = await bundle(k, { revokedGrants: ['grant_revoked_1'] });
    const o = structuredClone(signed);
    // Lies on every read but the one the signature would take (the second): its revocations erased.
    let n = 0;
    Object.defineProperty(o, 'revokedGrants', { enumerable: true, get: () => (++n === 2 ? ['grant_revoked_1'] : []) });
    const r = await verifyTrustBundle(o, k.root.publicKeyPem, { now: () => T0 });
    assert.ok(
      !r.valid || r.bundle.revokedGrants.includes('grant_revoked_1'),
      'a valid bundle keeps the revocation it was signed with',
    );
    assert.is(r.valid ? 'valid' : r.error.code, 'trust_bundle_invalid');
  },
);

test('a graph that shares one child at every level is refused without being expanded', async () => {
  const sba = await signedSba();
  let shared: unknown = 'x402';
  for (let i = 0; i < 40; i++) shared = [shared, shared];
  const r = await verifyCtl(
    { ...sba, authorization: { ...sba.authorization, allowedRails: shared } },
    { ...base(), amount: '30' },
  );
  assert.is(outcome(r), 'malformed');
});

test(
  'the one-shot signer signs from its own copy of the grant: a hidden member is neither ' + 'copied nor signed',
  async () => {
    const g = await grant(k, { destinationAllowlist: undefined });
    // Hidden, and not even a list: before, it was skipped by the check and still copied into the SBA.
    Object.defineProperty(g, 'destinationAllowlist', { value: 'merchant-a,merchant-b', enumerable: false });
    const sba = await createSignedSessionBudgetAuthorization(
      { grant: g, sessionId: 'sess_1', actorId: 'v', maxAmountMinor: '30', rail: 'x402', merchantId: 'merchant-a' },
      { signingKey: k.actor.privateKeyPem, now: () => T0 },
    );
    assert.equal(sba.authorization.destinationAllowlist, []);
    assert.is(outcome(await verifyCtl(JSON.stringify(sba), { ...base(), amount: '30' })), 'valid');
  },
);

test.run();
