import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  createDelegation,
  createMemorySpendStorage,
  formatTimestamp,
  generateKeyPair,
  verifyCtl,
  type Delegation,
  type PolicyGrant,
  linkRevocationId,
} from '../../src/index.js';
import { verifyCtlEdge } from '../../src/edge.js';
import { keys, grant, bundle, fakeAuthority, T0, HOUR, type Keys } from '../helpers/fixtures.js';
import { chain, rawDelegation, sbaUnder } from '../helpers/delegation-fixtures.js';

let k: Keys;
test.before(async () => {
  k = await keys();
});

const opts = (extra: Record<string, unknown> = {}) => ({
  amount: '30',
  currency: 'USD',
  merchantId: 'merchant-a',
  now: () => T0,
  signingKeyPem: k.authority.publicKeyPem,
  fetch: fakeAuthority(k).fetch,
  spendStorage: createMemorySpendStorage(),
  ...extra,
});

for (const [name, verify] of [
  ['verifyCtl', verifyCtl],
  ['verifyCtlEdge', verifyCtlEdge],
] as const) {
  test(`${name}: chains of depth 1–4 verify; the result names the root grant`, async () => {
    for (let depth = 1; depth <= 4; depth++) {
      const c = await chain(k, depth);
      const sba = await sbaUnder(k, c.leaf, c.holders[depth]!);
      assert.is(sba.authorization.grantId, `dlg-${depth}`);
      assert.is(sba.authorization.policyHash, c.root.policyHash);
      const r = await verify(sba, opts());
      assert.ok(r.valid, `depth ${depth}: ${JSON.stringify(!r.valid && r.error)}`);
      if (r.valid) assert.is(r.grant.grantId, c.root.grantId);
    }
  });

  test(`${name}: depth beyond the root's maxDepth is delegation_invalid; no maxDepth allows none`, async () => {
    const c = await chain(k, 2, 2);
    const too = await rawDelegation(c.leaf, c.holders[2]!, { delegationId: 'dlg-3' });
    const holder3 = await generateKeyPair();
    const deep = await rawDelegation(c.leaf, c.holders[2]!, { delegationId: 'dlg-3', actorKey: holder3.publicJwk });
    assert.ok(too);
    const r = await verify(await sbaUnder(k, deep, holder3), opts());
    assert.is(!r.valid && r.error.code, 'delegation_invalid');
    assert.match(!r.valid ? r.error.message : '', /allows 2/);
    const plain = await grant(k);
    const h = await generateKeyPair();
    const d = await rawDelegation(plain, k.actor, { actorKey: h.publicJwk });
    const r2 = await verify(await sbaUnder(k, d, h), opts());
    assert.is(!r2.valid && r2.error.code, 'delegation_invalid');
  });
}

/** Each narrowing rule: [member, the widening value, the value at its limit]. */
function rules(
  root: PolicyGrant,
  ancestorKey: unknown,
): Array<[string, Record<string, unknown>, Record<string, unknown>]> {
  return [
    ['maxAmountMinor', { maxAmountMinor: '5001' }, { maxAmountMinor: '5000' }],
    ['expiresAt', { expiresAt: formatTimestamp(Date.parse(root.expiresAt) + 1000) }, { expiresAt: root.expiresAt }],
    ['issuedAt', { issuedAt: formatTimestamp(Date.parse(root.issuedAt) - 1000) }, { issuedAt: root.issuedAt }],
    ['allowedPurposes', { allowedPurposes: ['api:*', 'ev:*'] }, { allowedPurposes: ['api:*', 'ev:charging'] }],
    ['allowedPurposes', { allowedPurposes: undefined }, { allowedPurposes: ['api:search'] }],
    ['allowedRails', { allowedRails: ['x402', 'card', 'ach'] }, { allowedRails: ['x402', 'card'] }],
    [
      'allowedAssets',
      { allowedAssets: [{ standard: 'iso4217', code: 'EUR' }] },
      { allowedAssets: [{ standard: 'iso4217', code: 'USD' }] },
    ],
    [
      'destinationAllowlist',
      { destinationAllowlist: ['merchant-a', 'merchant-z'] },
      { destinationAllowlist: ['merchant-a'] },
    ],
    [
      'windows',
      { windows: [{ every: 'P1D', maxAmountMinor: '1001' }] },
      { windows: [{ every: 'P1D', maxAmountMinor: '1000' }] },
    ],
    [
      'windows',
      { windows: [{ every: 'PT1H', maxAmountMinor: '100' }] },
      {
        windows: [
          { every: 'P1D', maxAmountMinor: '1000' },
          { every: 'PT1H', maxAmountMinor: '100' },
        ],
      },
    ],
    ['actorKey', { actorKey: ancestorKey }, {}],
    ['delegationId', { delegationId: root.grantId }, { delegationId: 'dlg-other' }],
  ];
}

test('each narrowing rule: refused naming the member when broken, accepted at its limit', async () => {
  const root = await grant(k, { delegation: { maxDepth: 2 }, windows: [{ every: 'P1D', maxAmountMinor: '1000' }] });
  for (const [member, wide, limit] of rules(root, k.actor.publicJwk)) {
    for (const [kind, fields] of [
      ['wide', wide],
      ['limit', limit],
    ] as const) {
      const holder = fields['actorKey'] ? k.actor : await generateKeyPair();
      const base = { actorKey: holder.publicJwk, windows: [{ every: 'P1D', maxAmountMinor: '1000' }] };
      const d = await rawDelegation(root, k.actor, { ...base, ...fields });
      const r = await verifyCtl(await sbaUnder(k, d, holder), opts());
      const why = `${member} ${kind}: ${JSON.stringify(!r.valid && r.error)}`;
      if (kind === 'limit') assert.ok(r.valid, why);
      else {
        assert.is(!r.valid && r.error.code, 'delegation_invalid', why);
        assert.match(!r.valid ? r.error.message : '', `.${member}`, why);
      }
    }
  }
});

test('createDelegation refuses to sign a widening link, naming the member, and past maxDepth', async () => {
  const root = await grant(k, { delegation: { maxDepth: 1 } });
  const h = await generateKeyPair();
  const fields = { actorKey: h.publicJwk, maxAmountMinor: '6000', expiresAt: root.expiresAt };
  try {
    await createDelegation(root, fields, { signingKey: k.actor.privateKeyPem, now: () => T0 });
    assert.unreachable('signed a widening link');
  } catch (e) {
    assert.is((e as { code?: string }).code, 'delegation_invalid');
    assert.match((e as Error).message, 'maxAmountMinor');
  }
  const now = () => T0;
  const d = await createDelegation(
    root,
    { ...fields, maxAmountMinor: '100' },
    { signingKey: k.actor.privateKeyPem, now },
  );
  const h2 = await generateKeyPair();
  try {
    await createDelegation(
      d,
      { ...fields, actorKey: h2.publicJwk, maxAmountMinor: '50' },
      { signingKey: h.privateKeyPem, now },
    );
    assert.unreachable('signed past maxDepth');
  } catch (e) {
    assert.is((e as { code?: string }).code, 'delegation_invalid');
  }
  try {
    await createDelegation(root, { ...fields, maxAmountMinor: '1' }, { signingKey: h.privateKeyPem, now });
    assert.unreachable("signed with a key other than the parent's actorKey");
  } catch (e) {
    assert.instance(e, RangeError);
  }
});

test('a link not signed by its parent actorKey, or with another keyId, is delegation_invalid', async () => {
  const c = await chain(k, 1);
  const stranger = await generateKeyPair();
  const h = await generateKeyPair();
  const forged = await rawDelegation(c.root, stranger, { actorKey: h.publicJwk, keyId: c.links[0]!.keyId });
  const r = await verifyCtl(await sbaUnder(k, forged, h), opts());
  assert.is(!r.valid && r.error.code, 'delegation_invalid');
  assert.match(!r.valid ? r.error.message : '', 'signature');
  const wrongKid = await rawDelegation(c.root, k.actor, { actorKey: h.publicJwk, keyId: 'not-the-thumbprint' });
  const r2 = await verifyCtl(await sbaUnder(k, wrongKid, h), opts());
  assert.is(!r2.valid && r2.error.code, 'delegation_invalid');
  // An edited link (its ceiling raised after signing) no longer verifies.
  const sba = JSON.parse(JSON.stringify(await sbaUnder(k, c.leaf, c.holders[1]!)));
  (sba.grant as Delegation).maxAmountMinor = '4600';
  const r3 = await verifyCtl(sba, opts());
  assert.not.ok(r3.valid);
});

test('a link expired is grant_expired; a link issued in the future is not_yet_valid', async () => {
  const root = await grant(k, { delegation: { maxDepth: 1 } });
  const h = await generateKeyPair();
  const d = await rawDelegation(root, k.actor, { actorKey: h.publicJwk, expiresAt: formatTimestamp(T0 + HOUR) });
  const sba = await sbaUnder(k, d, h);
  const late = await verifyCtl(sba, opts({ now: () => T0 + HOUR }));
  assert.is(!late.valid && late.error.code, 'grant_expired');
  const future = await rawDelegation(root, k.actor, { actorKey: h.publicJwk, issuedAt: formatTimestamp(T0 + 60_000) });
  const s2 = await sbaUnder(k, future, h);
  const early = await verifyCtl(s2, opts({ now: () => T0 - 1 }));
  assert.not.ok(early.valid);
  const r = await verifyCtl(s2, opts({ now: () => T0 + 60_000 + 1 }));
  assert.ok(r.valid, JSON.stringify(!r.valid && r.error));
});

test('P-256 holders delegate and verify as Ed25519 ones do', async () => {
  const c = await chain(k, 3, 4, 'ES256');
  const r = await verifyCtl(await sbaUnder(k, c.leaf, c.holders[3]!), opts());
  assert.ok(r.valid, JSON.stringify(!r.valid && r.error));
  const e = await verifyCtlEdge(await sbaUnder(k, c.leaf, c.holders[3]!), opts());
  assert.ok(e.valid, JSON.stringify(!e.valid && e.error));
});

test('a revoked middle link stops the leaf online (asked at the root base) and offline (bundle)', async () => {
  const c = await chain(k, 3);
  const a = fakeAuthority(k);
  const sba = await sbaUnder(k, c.leaf, c.holders[3]!, '30', a.fetch);
  assert.ok((await verifyCtl(sba, opts({ fetch: a.fetch }))).valid);
  // A bare delegation id revokes nothing: any delegator may copy it (PROTOCOL.md §14).
  a.revoke('dlg-2');
  assert.ok((await verifyCtl(sba, opts({ fetch: a.fetch, revocationTtl: 0 }))).valid);
  a.revoke(linkRevocationId(c.links[1]!));
  const online = await verifyCtl(sba, opts({ fetch: a.fetch, revocationTtl: 0 }));
  assert.is(!online.valid && online.error.code, 'grant_revoked');
  assert.match(!online.valid ? online.error.message : '', 'dlg-2');
  // Its sibling branch above (dlg-1 alone) still pays.
  const upper = await sbaUnder(k, c.links[0]!, c.holders[1]!, '30', fakeAuthority(k).fetch);
  assert.ok((await verifyCtl(upper, opts({ fetch: a.fetch, revocationTtl: 0 }))).valid);

  // Before the bundle that revokes it (the verifier keeps a revocation for good, PROTOCOL.md §12).
  const clean = await verifyCtl(sba, {
    ...opts(),
    offline: true,
    trustBundles: [await bundle(k)],
    rootPublicKeyPem: k.root.publicKeyPem,
    signingKeyPem: undefined,
  });
  assert.ok(clean.valid, JSON.stringify(!clean.valid && clean.error));
  const byId = await verifyCtl(sba, {
    ...opts(),
    offline: true,
    trustBundles: [await bundle(k, { revokedGrants: ['dlg-2'] })],
    rootPublicKeyPem: k.root.publicKeyPem,
    signingKeyPem: undefined,
  });
  assert.ok(byId.valid, JSON.stringify(!byId.valid && byId.error));
  const b = await bundle(k, { revokedGrants: [linkRevocationId(c.links[1]!)] });
  const offline = await verifyCtl(sba, {
    ...opts(),
    offline: true,
    trustBundles: [b],
    rootPublicKeyPem: k.root.publicKeyPem,
    signingKeyPem: undefined,
  });
  assert.is(!offline.valid && offline.error.code, 'grant_revoked');
});

test('two siblings racing 200 payments on a shared verifier storage never pass their parent', async () => {
  const root = await grant(k, { delegation: { maxDepth: 2 } });
  const mid = await generateKeyPair();
  const parent = await createDelegation(
    root,
    { actorKey: mid.publicJwk, maxAmountMinor: '1000', expiresAt: root.expiresAt, delegationId: 'parent' },
    { signingKey: k.actor.privateKeyPem, now: () => T0 },
  );
  const sibs = await Promise.all([generateKeyPair(), generateKeyPair()]);
  const kids = await Promise.all(
    sibs.map((s, i) =>
      createDelegation(
        parent,
        { actorKey: s.publicJwk, maxAmountMinor: '800', expiresAt: root.expiresAt, delegationId: `sib-${i}` },
        { signingKey: mid.privateKeyPem, now: () => T0 },
      ),
    ),
  );
  const sbas = [];
  for (let i = 0; i < 100; i++) for (let s = 0; s < 2; s++) sbas.push(await sbaUnder(k, kids[s]!, sibs[s]!, '10'));
  const storage = createMemorySpendStorage();
  const rs = await Promise.all(
    sbas.map((sba, i) =>
      (i % 2 ? verifyCtlEdge : verifyCtl)(sba, opts({ amount: '10', trackSpend: true, spendStorage: storage })),
    ),
  );
  const ok = rs.filter((r) => r.valid).length;
  assert.is(ok, 100, 'exactly the parent ceiling of 1000 is accepted');
  assert.is(await storage.total('grant:' + root.grantId + '/parent'), 1000n);
  assert.ok(rs.filter((r) => !r.valid).every((r) => !r.valid && r.error.code === 'budget_exceeded'));
});

test("the root's offline allowance bounds the whole tree", async () => {
  const root = await grant(k, { delegation: { maxDepth: 2 }, offline: { maxPayments: 3 } });
  const h1 = await generateKeyPair();
  const h2 = await generateKeyPair();
  const d1 = await createDelegation(
    root,
    { actorKey: h1.publicJwk, maxAmountMinor: '1000', expiresAt: root.expiresAt },
    { signingKey: k.actor.privateKeyPem, now: () => T0 },
  );
  const d2 = await createDelegation(
    root,
    { actorKey: h2.publicJwk, maxAmountMinor: '1000', expiresAt: root.expiresAt },
    { signingKey: k.actor.privateKeyPem, now: () => T0 },
  );
  const storage = createMemorySpendStorage();
  const o = {
    ...opts(),
    offline: true,
    trustBundles: [await bundle(k)],
    rootPublicKeyPem: k.root.publicKeyPem,
    spendStorage: storage,
  };
  const results = [];
  for (let i = 0; i < 4; i++) results.push(await verifyCtl(await sbaUnder(k, i % 2 ? d2 : d1, i % 2 ? h2 : h1), o));
  assert.equal(
    results.map((r) => r.valid),
    [true, true, true, false],
  );
  assert.is(!results[3]!.valid && results[3]!.error.code, 'offline_limit_exceeded');
});

test.run();
