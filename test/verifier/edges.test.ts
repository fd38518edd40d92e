// PROTOCOL.md §12 at the edges where a device or an integrator lives: a broken clock, a payer's
// timestamps, a lapsed bundle, a verifier that cannot ask, a chain that arrived in the mail. Each
// test here fails against a verifier that lacks its rule; each runs on `ctl` and on `ctl/edge`.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  createMemorySpendStorage,
  createMemoryTimeFloor,
  createSession,
  createTrustBundle,
  formatTimestamp,
  verifyPolicyGrant,
  verifyTrustBundle,
  type SignedBudgetAuthorization,
} from '../../src/index.js';
import { verifyCtl } from '../../src/index.js';
import { verifyCtlEdge } from '../../src/edge.js';
import { createVerifier } from '../../src/verifier/verify.js';
import { createCtlCrypto } from '../../src/crypto/index.js';
import { keys, grant, bundle, authorityJwks, fakeAuthority, T0, HOUR, type Keys } from '../helpers/fixtures.js';
import { rotatedRoot, bundleBy } from '../helpers/root-chain.js';
import { createRootStatement, createSignedPolicyGrant, generateKeyPair, type PolicyGrant } from '../../src/index.js';
import type { GrantFields } from '../../src/artifacts/grant.js';

delete process.env['CTL_SBA_SIGNING_PUBLIC_KEY_PEM'];
const k: Keys = await keys();
const code = (r: { valid: boolean; error?: { code: string } }) => (r.valid ? 'valid' : r.error!.code);

async function wallet(over: Partial<GrantFields> = {}, now = () => T0) {
  const g = await grant(k, over);
  return {
    g,
    s: createSession(g, { actorId: 'v', signingKey: k.actor.privateKeyPem, fetch: fakeAuthority(k).fetch, now }),
  };
}
/** The same grant's members, signed by another key (the fixtures sign with the authority's). */
async function createSignedPolicyGrantAs(g: PolicyGrant, signingKey: string): Promise<PolicyGrant> {
  const { version: _v, issuer, keyId, signature: _s, ...fields } = g;
  return createSignedPolicyGrant(fields as never, { issuer, keyId, signingKey, now: () => Date.parse(g.issuedAt) });
}
const pay = (s: Awaited<ReturnType<typeof wallet>>['s'], amount = '10') =>
  s.createSba({ amount, currency: 'USD', rail: 'x402', merchantId: 'merchant-a' });

for (const [name, verify] of [
  ['ctl', verifyCtl],
  ['ctl/edge', verifyCtlEdge],
] as const) {
  const offlineBy = (o: Record<string, unknown> = {}) => ({
    amount: '10',
    currency: 'USD',
    merchantId: 'merchant-a',
    offline: true,
    signingKeyPem: k.authority.publicKeyPem,
    now: () => T0,
    spendStorage: createMemorySpendStorage(),
    ...o,
  });

  test(`${name}: a clock or a time option that is not a finite number refuses, never "no check"`, async () => {
    const { s } = await wallet({ expiresAt: formatTimestamp(T0 + HOUR) });
    const sba = await pay(s);
    // Long after every expiry: a NaN clock would have made each `now >= expiresAt` false.
    const late = T0 + 1000 * HOUR;
    assert.is(code(await verify(sba, offlineBy({ now: () => late }))), 'grant_expired');
    for (const clock of [() => NaN, () => undefined, () => String(late), () => Infinity]) {
      const r = await verify(sba, offlineBy({ now: clock }));
      assert.is(code(r), 'malformed', `now() → ${String(clock())}`);
      assert.match(!r.valid ? r.error.message : '', /options\.now\(\)/);
    }
    for (const tol of [NaN, '0', -1, Infinity, null]) {
      assert.is(
        code(await verify(sba, offlineBy({ now: () => late, clockToleranceMs: tol }))),
        'malformed',
        `tolerance ${String(tol)}`,
      );
    }
    for (const o of [{ revocationTtl: NaN }, { revocationTimeoutMs: '3000' }, { jwksTtl: Infinity }]) {
      assert.is(code(await verify(sba, offlineBy({ ...o }))), 'malformed', JSON.stringify(Object.keys(o)));
    }
    // Math.max(NaN, floor) is NaN: the persisted floor must not be bypassed by a clock that fails.
    const floor = createMemoryTimeFloor(late);
    assert.is(code(await verify(sba, offlineBy({ now: () => NaN, timeFloor: floor }))), 'malformed');
    assert.is(
      code(await verify(sba, offlineBy({ now: () => T0, timeFloor: floor }))),
      'grant_expired',
      'the floor holds',
    );
    assert.is(code(await verify(sba, offlineBy())), 'valid');
  });

  test(`${name}: the time floor rises to the clock and the root's bundles, never to a payer's issuedAt`, async () => {
    // A tolerance of an hour admits SBAs issued up to an hour ahead; 25 of them must not move the floor 25 hours.
    let t = T0;
    const { s } = await wallet({ maxAmountMinor: '1000' }, () => t + HOUR - 1000);
    const floor = createMemoryTimeFloor();
    const storage = createMemorySpendStorage();
    const b = await bundle(k);
    for (let i = 0; i < 25; i++) {
      t = T0 + i * 60_000;
      const r = await verify(
        await pay(s, '1'),
        offlineBy({
          amount: '1',
          now: () => t,
          clockToleranceMs: HOUR,
          timeFloor: floor,
          spendStorage: storage,
          signingKeyPem: undefined,
          trustBundles: [b],
          rootPublicKeyPem: k.root.publicKeyPem,
        }),
      );
      assert.is(code(r), 'valid', `payment ${i + 1}`);
    }
    assert.ok(
      (floor.get() as number) <= t,
      `the floor is ${((floor.get() as number) - t) / HOUR} h ahead of the clock`,
    );
    // A payer honest about the time still pays, and a fresh bundle is still taken.
    const honest = await wallet({}, () => t);
    assert.is(code(await verify(await pay(honest.s), offlineBy({ now: () => t, timeFloor: floor }))), 'valid');
    const fresh = await bundle(k, { sequence: 2, issuedAt: formatTimestamp(t - 1000) });
    assert.is(
      code(await verifyTrustBundle(fresh, k.root.publicKeyPem, { now: () => Math.max(t, floor.get() as number) })),
      'valid',
    );
  });

  test(`${name}: what a bundle revoked stays revoked after it expires, while another scope still vouches`, async () => {
    const v = name === 'ctl' ? createVerifier(createCtlCrypto('native')) : verify;
    let t = T0;
    const { s, g } = await wallet({}, () => t);
    const sba = await pay(s);
    // Scope ev-charging lists the revocation and lives 2 h; scope eu, issued before it, lives a day.
    const revoking = await bundle(k, { revokedGrants: [g.grantId], expiresAt: formatTimestamp(T0 + 2 * HOUR) });
    const longLived = await createTrustBundle(
      {
        sequence: 1,
        scope: { region: 'eu' },
        revokedGrants: [],
        issuers: [{ issuer: 'authority.test', keys: authorityJwks(k).keys }],
        issuedAt: formatTimestamp(T0 - HOUR),
        expiresAt: formatTimestamp(T0 + 24 * HOUR),
      },
      { signingKey: k.root.privateKeyPem, issuer: 'root.test' },
    );
    const o = (at: number, trustBundles: unknown[]) =>
      offlineBy({ now: () => at, trustBundles, rootPublicKeyPem: k.root.publicKeyPem, signingKeyPem: undefined });
    assert.is(code(await v(sba, o(T0, [revoking, longLived]))), 'grant_revoked');
    t = T0 + 3 * HOUR;
    const later = await pay(s);
    assert.is(code(await v(later, o(t, [revoking, longLived]))), 'grant_revoked', 'the revoking bundle has expired');
    assert.is(code(await v(later, o(t, [longLived]))), 'grant_revoked', 'and is no longer given');
    // Across a restart the host carries them (a device persists them): a fresh verifier is told.
    const fresh = createVerifier(createCtlCrypto('native'));
    assert.is(code(await fresh(later, { ...o(t, [longLived]), keptRevocations: [g.grantId] })), 'grant_revoked');
    assert.is(
      code(await fresh(later, { ...o(t, [longLived]), keptRevocations: new Set([g.grantId]) })),
      'grant_revoked',
    );
    assert.is(code(await fresh(later, o(t, [longLived]))), 'valid', 'a verifier never told of it');
    // A bundle that fails its root check revokes nothing (it could be anyone's).
    const forged = await createTrustBundle(
      {
        sequence: 9,
        scope: { region: 'us' },
        revokedGrants: [g.grantId],
        issuers: [],
        issuedAt: formatTimestamp(T0 - HOUR),
        expiresAt: formatTimestamp(T0 + HOUR),
      },
      { signingKey: k.authority.privateKeyPem, issuer: 'root.test' },
    );
    const other = createVerifier(createCtlCrypto('native'));
    assert.is(code(await other(sba, o(T0, [forged, longLived]))), 'valid');
  });

  test(`${name}: offline, one SBA is accepted once whatever trackSpend says`, async () => {
    const v = name === 'ctl' ? createVerifier(createCtlCrypto('native')) : verify;
    const { s, g } = await wallet({ maxAmountMinor: '5000' });
    const sba = await pay(s, '1250');
    const options = {
      amount: '1250',
      currency: 'USD',
      merchantId: 'merchant-a',
      offline: true,
      signingKeyPem: k.authority.publicKeyPem,
      now: () => T0,
    };
    const outcomes: string[] = [];
    for (let i = 0; i < 100; i++) outcomes.push(code(await v(sba, options)));
    assert.is(outcomes.filter((x) => x === 'valid').length, 1);
    assert.is(outcomes.filter((x) => x === 'replay').length, 99);
    // And the grant's ceiling holds across SBAs, from two wallets of one grant: 4 × 1250 fill 5000.
    const storage = createMemorySpendStorage();
    const other = (n: number) =>
      createSession(g, {
        actorId: `v${n}`,
        signingKey: k.actor.privateKeyPem,
        fetch: fakeAuthority(k).fetch,
        now: () => T0,
      });
    const [w1, w2] = [other(1), other(2)];
    const sbas = [
      await pay(w1, '1250'),
      await pay(w1, '1250'),
      await pay(w1, '1250'),
      await pay(w2, '1250'),
      await pay(w2, '1250'),
    ];
    const results: string[] = [];
    for (const x of sbas) results.push(code(await v(x, { ...options, spendStorage: storage, trackSpend: false })));
    assert.equal(results, ['valid', 'valid', 'valid', 'valid', 'budget_exceeded']);
    assert.is(await storage.total(`grant:${g.grantId}`), 5000n);
  });

  test(`${name}: offline.maxBundleAgeMs holds when no bundle vouched (signingKeyPem)`, async () => {
    const { s } = await wallet({ offline: { maxBundleAgeMs: HOUR } });
    const r = await verify(await pay(s), offlineBy());
    assert.is(code(r), 'offline_limit_exceeded');
    const b = await bundle(k);
    assert.is(
      code(
        await verify(
          await pay(s),
          offlineBy({ signingKeyPem: undefined, trustBundles: [b], rootPublicKeyPem: k.root.publicKeyPem }),
        ),
      ),
      'valid',
    );
    // Online, the limit does not apply: the authority answers for the grant.
    const online = await verify(await pay(s), { ...offlineBy(), offline: false, fetch: fakeAuthority(k).fetch });
    assert.is(code(online), 'valid');
  });

  test(`${name}: a fresh bundle restores the offline allowance; the same bundle does not`, async () => {
    let t = T0;
    const { s, g } = await wallet({ offline: { maxPayments: 2, maxAmountMinor: '100' } }, () => t);
    const storage = createMemorySpendStorage();
    const b1 = await bundle(k, { issuedAt: formatTimestamp(T0 - HOUR) });
    const o = (at: number, trustBundles: unknown[]) =>
      offlineBy({
        now: () => at,
        trustBundles,
        rootPublicKeyPem: k.root.publicKeyPem,
        signingKeyPem: undefined,
        spendStorage: storage,
      });
    const outcomes: string[] = [];
    for (let i = 0; i < 3; i++) outcomes.push(code(await verify(await pay(s), o(T0, [b1]))));
    assert.equal(outcomes, ['valid', 'valid', 'offline_limit_exceeded']);
    const b2 = await bundle(k, { sequence: 2, issuedAt: formatTimestamp(T0 + HOUR) });
    const after: string[] = [];
    t = T0 + 2 * HOUR;
    for (let i = 0; i < 3; i++) after.push(code(await verify(await pay(s), o(t, [b1, b2]))));
    assert.equal(after, ['valid', 'valid', 'offline_limit_exceeded'], 'refreshed once');
    // The grant's own total is kept across refreshes.
    assert.is(await storage.total(`grant:${g.grantId}`), 40n);
  });
}

test('ctl: an older bundle, or one that vouches for nobody, never reopens a spent offline allowance', async () => {
  let t = T0;
  const { s } = await wallet({ offline: { maxPayments: 2 } }, () => t);
  const storage = createMemorySpendStorage();
  const b1 = await bundle(k, { sequence: 1, issuedAt: formatTimestamp(T0 - 2 * HOUR) });
  const b2 = await bundle(k, { sequence: 2, issuedAt: formatTimestamp(T0 - HOUR) });
  const nobody = await createTrustBundle(
    {
      sequence: 1,
      scope: { category: 'parking' },
      revokedGrants: [],
      issuers: [],
      issuedAt: formatTimestamp(T0 - 1000),
      expiresAt: formatTimestamp(T0 + 24 * HOUR),
    },
    { signingKey: k.root.privateKeyPem, issuer: 'root.test' },
  );
  const o = (trustBundles: unknown[]) => ({
    amount: '10',
    currency: 'USD',
    merchantId: 'merchant-a',
    offline: true,
    now: () => t,
    spendStorage: storage,
    trustBundles,
    rootPublicKeyPem: k.root.publicKeyPem,
  });
  const codes: string[] = [];
  for (let i = 0; i < 3; i++) codes.push(code(await verifyCtl(await pay(s), o([b2]))));
  codes.push(code(await verifyCtl(await pay(s), o([b1]))), 'older bundle');
  codes.push(code(await verifyCtl(await pay(s), o([b2, nobody]))), 'a fresh bundle vouching for nobody');
  codes.push(
    code(await verifyCtl(await pay(s), { ...o([]), trustBundles: undefined, signingKeyPem: k.authority.publicKeyPem })),
    'no bundle',
  );
  assert.equal(codes, [
    'valid',
    'valid',
    'offline_limit_exceeded',
    'offline_limit_exceeded',
    'older bundle',
    'offline_limit_exceeded',
    'a fresh bundle vouching for nobody',
    'offline_limit_exceeded',
    'no bundle',
  ]);
});

test('ctl: an expired grant bearing a revoked id unrevokes nothing, on any path', async () => {
  const v = createVerifier(createCtlCrypto('native'));
  let t = T0;
  const { s, g } = await wallet({ expiresAt: formatTimestamp(T0 + 2 * HOUR) }, () => t);
  const revoking = await bundle(k, { revokedGrants: [g.grantId] });
  const o = (at: number, extra: Record<string, unknown>) => ({
    amount: '10',
    currency: 'USD',
    merchantId: 'merchant-a',
    offline: true,
    now: () => at,
    spendStorage: createMemorySpendStorage(),
    ...extra,
  });
  const viaBundle = { trustBundles: [revoking], rootPublicKeyPem: k.root.publicKeyPem };
  assert.is(code(await v(await pay(s), o(T0, viaBundle))), 'grant_revoked');
  // Mallory signs, under a key of her own, an expired grant that bears the revoked id.
  const mallory = await generateKeyPair({ alg: 'EdDSA' });
  const forged = await grant(k, { grantId: g.grantId, expiresAt: formatTimestamp(T0 - HOUR) } as never, T0 - 3 * HOUR);
  const resigned = await createSignedPolicyGrantAs(forged, mallory.privateKeyPem);
  const hers = createSession(resigned, {
    actorId: 'm',
    signingKey: k.actor.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now: () => T0 - 2 * HOUR,
  });
  assert.is(code(await v(await pay(hers), o(T0, { signingKeyPem: mallory.publicKeyPem }))), 'grant_expired');
  // A clock set far ahead once (no time floor here) sees the genuine grant expired.
  assert.is(code(await v(await pay(s), o(T0 + 3 * HOUR, viaBundle))), 'grant_expired');
  t = T0 + 1000;
  assert.is(code(await v(await pay(s), o(t, viaBundle))), 'grant_revoked', 'the same live bundle still revokes it');
  // And a revocation seen once holds where no bundle is given: a pinned key, offline.
  assert.is(code(await v(await pay(s), o(t, { signingKeyPem: k.authority.publicKeyPem }))), 'grant_revoked');
});

test(
  "a root chain is the verifier's: a fork signed by a leaked retired root is refused " + 'given the accepted chain',
  async () => {
    const r = await rotatedRoot(k);
    // The device accepted version 2 (r.s2). Root version 1's key, retired since, leaks: the thief
    // signs another version 2 with keys of its own and a bundle with its bundle key.
    const thief = await generateKeyPair({ alg: 'EdDSA' });
    const thiefBundleKey = await generateKeyPair({ alg: 'EdDSA' });
    const fork = await createRootStatement(
      {
        rootVersion: 2,
        keys: [thief.publicJwk],
        threshold: 1,
        bundleKeys: [thiefBundleKey.publicJwk],
        issuedAt: formatTimestamp(T0 - HOUR),
      },
      { signers: [{ key: k.root.privateKeyPem }, { key: thief.privateKeyPem }] },
    );
    const evil = await bundleBy(k, thiefBundleKey);
    const now = () => T0;
    const opts = { now, minRootVersion: 2 };
    // Without the accepted chain the fork is a valid walk from the pin: the caller's mail decides.
    assert.is(code(await verifyTrustBundle(evil, k.root.publicKeyPem, { ...opts, rootChain: [fork] })), 'valid');
    assert.is(
      code(
        await verifyTrustBundle(evil, k.root.publicKeyPem, { ...opts, rootChain: [fork], acceptedRootChain: [r.s2] }),
      ),
      'root_rotation_invalid',
    );
    const genuine = await bundleBy(k, r.bk2);
    assert.is(
      code(
        await verifyTrustBundle(genuine, k.root.publicKeyPem, {
          ...opts,
          rootChain: [r.s2],
          acceptedRootChain: [r.s2],
        }),
      ),
      'valid',
    );
    assert.is(
      code(await verifyTrustBundle(genuine, k.root.publicKeyPem, { ...opts, acceptedRootChain: [r.s2] })),
      'root_rollback',
      'no chain below the accepted one',
    );
    for (const verify of [verifyCtl, verifyCtlEdge]) {
      const { s } = await wallet();
      const sba: SignedBudgetAuthorization = await pay(s);
      const base = {
        amount: '10',
        currency: 'USD',
        merchantId: 'merchant-a',
        offline: true,
        now,
        rootPublicKeyPem: k.root.publicKeyPem,
        minRootVersion: 2,
        spendStorage: createMemorySpendStorage(),
      };
      assert.is(
        code(await verify(sba, { ...base, trustBundles: [evil], rootChain: [fork], acceptedRootChain: [r.s2] })),
        'root_rotation_invalid',
      );
      assert.is(
        code(await verify(sba, { ...base, trustBundles: [genuine], rootChain: [r.s2], acceptedRootChain: [r.s2] })),
        'valid',
      );
    }
  },
);

test('verifyTrustBundle and verifyPolicyGrant: a clock or tolerance that is not a number refuses', async () => {
  const b = await bundle(k, { expiresAt: formatTimestamp(T0 + HOUR) });
  const g = await grant(k, { expiresAt: formatTimestamp(T0 + HOUR) });
  const late = T0 + 100 * HOUR;
  assert.is(code(await verifyTrustBundle(b, k.root.publicKeyPem, { now: () => late })), 'trust_bundle_expired');
  assert.is(
    code(await verifyPolicyGrant(g, { publicKey: k.authority.publicKeyPem, now: () => late })),
    'grant_expired',
  );
  for (const o of [
    { now: () => NaN },
    { now: () => undefined as never },
    { now: () => late, clockToleranceMs: NaN },
    { now: () => late, clockToleranceMs: '0' as never },
  ]) {
    assert.is(code(await verifyTrustBundle(b, k.root.publicKeyPem, o)), 'malformed');
    assert.is(code(await verifyPolicyGrant(g, { publicKey: k.authority.publicKeyPem, ...o })), 'malformed');
  }
});

test.run();
