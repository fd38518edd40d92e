// Root rotation (PROTOCOL.md §11): a verifier pinned at version 1 follows a chain of ctl-root/1
// statements, accepts bundles only from the newest version's bundle keys, and refuses broken links
// (root_rotation_invalid), older chains (root_rollback) and retired roots' bundles (trust_bundle_invalid).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  createRootStatement,
  createSession,
  generateKeyPair,
  jwkThumbprint,
  rootSignedBytes,
  verifyCtl,
  verifyRootChain,
  verifyTrustBundle,
  base64urlEncode,
  importSigningKey,
  type RootStatement,
} from '../../src/index.js';
import { verifyCtlEdge, verifyTrustBundleEdge } from '../../src/edge.js';
import { keys, grant, fakeAuthority, T0, type Keys } from '../helpers/fixtures.js';
import { bundleBy, rotate4, rotatedRoot, type RotatedRoot } from '../helpers/root-chain.js';

let k: Keys;
let r: RotatedRoot;
test.before(async () => {
  k = await keys();
  r = await rotatedRoot(k);
});

const now = () => T0;
const codeOf = (x: { valid: boolean; error?: { code: string } }) => (x.valid ? 'valid' : x.error!.code);
const clone = <T>(v: T): T => JSON.parse(JSON.stringify(v));

async function sba() {
  const g = await grant(k);
  const s = createSession(g, {
    actorId: 'vehicle-42',
    signingKey: k.actor.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now,
  });
  return s.createSba({ amount: '30', currency: 'USD', rail: 'x402', merchantId: 'merchant-a', purpose: 'api:search' });
}
const offline = { amount: '30', currency: 'USD', merchantId: 'merchant-a', offline: true, now };

test('rotate 1 → 2 → 3: the chain reaches version 3, a 2-of-3 root set, and its bundle key', async () => {
  const v = await verifyRootChain(k.root.publicKeyPem, [r.s2, r.s3]);
  assert.ok(v.valid, JSON.stringify(v));
  if (!v.valid) return;
  assert.is(v.rootVersion, 3);
  assert.is(v.threshold, 2);
  assert.equal(
    v.rootKeys.map((x) => x.kid),
    await Promise.all([r.a, r.b, r.c].map((x) => jwkThumbprint(x.publicJwk))),
  );
  assert.equal(
    v.bundleKeys.map((x) => x.kid),
    [await jwkThumbprint(r.bk3.publicJwk)],
  );
  const one = await verifyRootChain(k.root.publicKeyPem, []);
  assert.ok(one.valid && one.rootVersion === 1 && one.bundleKeys[0]!.kid === (await jwkThumbprint(k.root.publicJwk)));
  // JSON text of the chain is read with the strict parser.
  const text = await verifyRootChain(k.root.publicKeyPem, JSON.stringify([r.s2, r.s3]), { minVersion: 3 });
  assert.ok(text.valid && text.rootVersion === 3);
});

test('a verifier pinned at version 1 follows the chain: the version-3 bundle key vouches, offline', async () => {
  const s = await sba();
  const b3 = await bundleBy(k, r.bk3);
  for (const verify of [verifyCtl, verifyCtlEdge]) {
    assert.is(
      codeOf(
        await verify(s, {
          ...offline,
          trustBundles: [b3],
          rootPublicKeyPem: k.root.publicKeyPem,
          rootChain: [r.s2, r.s3],
        }),
      ),
      'valid',
    );
    // Without the chain the same bundle is a stranger's.
    assert.is(
      codeOf(await verify(s, { ...offline, trustBundles: [b3], rootPublicKeyPem: k.root.publicKeyPem })),
      'trust_bundle_invalid',
    );
  }
  for (const vb of [verifyTrustBundle, verifyTrustBundleEdge]) {
    const ok = await vb(b3, k.root.publicKeyPem, { now, rootChain: [r.s2, r.s3], minRootVersion: 3 });
    assert.ok(ok.valid && ok.rootVersion === 3, JSON.stringify(ok));
  }
});

test(
  'a bundle signed by a retired root (version 1 or 2) is trust_bundle_invalid once version ' + '3 is accepted',
  async () => {
    const s = await sba();
    const chain = [r.s2, r.s3];
    for (const signer of [k.root, r.bk2, r.r2, r.a]) {
      const b = await bundleBy(k, signer);
      assert.is(
        codeOf(await verifyTrustBundle(b, k.root.publicKeyPem, { now, rootChain: chain })),
        'trust_bundle_invalid',
      );
      assert.is(
        codeOf(
          await verifyCtl(s, {
            ...offline,
            trustBundles: [b],
            rootPublicKeyPem: k.root.publicKeyPem,
            rootChain: chain,
          }),
        ),
        'trust_bundle_invalid',
      );
    }
    // Before rotation the pinned root signs bundles directly, as it always did.
    assert.is(
      codeOf(await verifyTrustBundle(await bundleBy(k, k.root), k.root.publicKeyPem, { now, rootChain: [] })),
      'valid',
    );
    assert.is(
      codeOf(await verifyTrustBundle(await bundleBy(k, r.bk2), k.root.publicKeyPem, { now, rootChain: [r.s2] })),
      'valid',
    );
  },
);

test(
  'a statement short of the threshold is root_rotation_invalid (old set, new set, and ' + 'a key counted twice)',
  async () => {
    // New set 2-of-3 but only a signs (with the old root r2): possession not proven.
    const shortNew = await createRootStatement(
      {
        rootVersion: 3,
        keys: [r.a.publicJwk, r.b.publicJwk, r.c.publicJwk],
        threshold: 2,
        bundleKeys: [r.bk3.publicJwk],
        issuedAt: r.s3.issuedAt,
      },
      { signers: [{ key: r.r2.privateKeyPem }, { key: r.a.privateKeyPem }] },
    );
    // Old set not signing at all.
    const noOld = await createRootStatement(
      {
        rootVersion: 3,
        keys: [r.a.publicJwk, r.b.publicJwk, r.c.publicJwk],
        threshold: 2,
        bundleKeys: [r.bk3.publicJwk],
        issuedAt: r.s3.issuedAt,
      },
      { signers: [{ key: r.a.privateKeyPem }, { key: r.b.privateKeyPem }] },
    );
    // Version 4 signed by one key of the 2-of-3 set (twice, under a second keyId: it still counts once).
    const fields4 = {
      rootVersion: 4,
      keys: [r.b.publicJwk],
      threshold: 1,
      bundleKeys: [r.bk4.publicJwk],
      issuedAt: r.s3.issuedAt,
    };
    const oneOfThree = await createRootStatement(fields4, { signers: [{ key: r.b.privateKeyPem }] });
    const bytes = rootSignedBytes(oneOfThree as unknown as Record<string, unknown>);
    const sigA = base64urlEncode(await (await importSigningKey(r.b.privateKeyPem)).sign(bytes));
    const twice = {
      ...oneOfThree,
      signatures: [...oneOfThree.signatures, { keyId: await jwkThumbprint(r.a.publicJwk), signature: sigA }],
    };
    for (const chain of [
      [r.s2, shortNew],
      [r.s2, noOld],
      [r.s2, r.s3, oneOfThree],
      [r.s2, r.s3, twice],
    ]) {
      const v = await verifyRootChain(k.root.publicKeyPem, chain);
      assert.is(codeOf(v), 'root_rotation_invalid', JSON.stringify(chain.map((s) => s.rootVersion)));
    }
    // verifyCtl refuses a broken chain with its code, whatever bundle comes with it.
    const s = await sba();
    const b3 = await bundleBy(k, r.bk3);
    assert.is(
      codeOf(
        await verifyCtl(s, {
          ...offline,
          trustBundles: [b3],
          rootPublicKeyPem: k.root.publicKeyPem,
          rootChain: [r.s2, shortNew],
        }),
      ),
      'root_rotation_invalid',
    );
  },
);

test('a skipped version is root_rotation_invalid, however well signed', async () => {
  // Version 3 signed by the pinned root itself and by a and c: every signature is good, but 2 is missing.
  const jump = await createRootStatement(
    {
      rootVersion: 3,
      keys: [r.a.publicJwk, r.b.publicJwk, r.c.publicJwk],
      threshold: 2,
      bundleKeys: [r.bk3.publicJwk],
    },
    { signers: [{ key: k.root.privateKeyPem }, { key: r.a.privateKeyPem }, { key: r.c.privateKeyPem }], now },
  );
  for (const chain of [[jump], [r.s3], [r.s3, r.s2], [r.s2, r.s2, r.s3]]) {
    assert.is(codeOf(await verifyRootChain(k.root.publicKeyPem, chain)), 'root_rotation_invalid');
  }
});

test('a replayed older chain is root_rollback once a higher version was stored', async () => {
  for (const [chain, min] of [
    [[r.s2], 3],
    [[], 2],
    [[r.s2, r.s3], 4],
  ] as const) {
    assert.is(codeOf(await verifyRootChain(k.root.publicKeyPem, chain, { minVersion: min })), 'root_rollback');
  }
  const b2 = await bundleBy(k, r.bk2);
  assert.is(
    codeOf(await verifyTrustBundle(b2, k.root.publicKeyPem, { now, rootChain: [r.s2], minRootVersion: 3 })),
    'root_rollback',
  );
  assert.is(
    codeOf(await verifyTrustBundle(await bundleBy(k, k.root), k.root.publicKeyPem, { now, minRootVersion: 2 })),
    'root_rollback',
  );
  const s = await sba();
  assert.is(
    codeOf(
      await verifyCtl(s, {
        ...offline,
        trustBundles: [b2],
        rootPublicKeyPem: k.root.publicKeyPem,
        rootChain: [r.s2],
        minRootVersion: 3,
      }),
    ),
    'root_rollback',
  );
  assert.is(codeOf(await verifyRootChain(k.root.publicKeyPem, [r.s2, r.s3], { minVersion: 3 })), 'valid');
});

test(
  'accepted: a fork signed by a leaked retired root key walks from the pin, but does ' +
    'not extend the accepted chain',
  async () => {
    const thief = await generateKeyPair({ alg: 'EdDSA' });
    const f3 = await createRootStatement(
      { rootVersion: 3, keys: [thief.publicJwk], threshold: 1, bundleKeys: [thief.publicJwk] },
      { signers: [{ key: r.r2.privateKeyPem }, { key: thief.privateKeyPem }], now },
    );
    const f4 = await createRootStatement(
      { rootVersion: 4, keys: [thief.publicJwk], threshold: 1, bundleKeys: [thief.publicJwk] },
      { signers: [{ key: thief.privateKeyPem }], now },
    );
    // The spec's walk from the pin alone accepts it (r2 did sign version 3) …
    assert.is(codeOf(await verifyRootChain(k.root.publicKeyPem, [r.s2, f3, f4], { minVersion: 3 })), 'valid');
    // … a verifier that keeps the chain it accepted refuses it.
    assert.is(
      codeOf(await verifyRootChain(k.root.publicKeyPem, [r.s2, f3, f4], { accepted: [r.s2, r.s3] })),
      'root_rotation_invalid',
    );
    assert.is(codeOf(await verifyRootChain(k.root.publicKeyPem, [r.s2], { accepted: [r.s2, r.s3] })), 'root_rollback');
    const s4 = await rotate4(r);
    const ext = await verifyRootChain(k.root.publicKeyPem, [r.s2, r.s3, s4], {
      accepted: JSON.stringify([r.s2, r.s3]),
    });
    assert.ok(ext.valid && ext.rootVersion === 4);
    assert.is(codeOf(await verifyRootChain(k.root.publicKeyPem, [r.s2, r.s3], { accepted: [r.s2, r.s3] })), 'valid');
    assert.is(
      codeOf(await verifyRootChain(k.root.publicKeyPem, [r.s2, r.s3], { accepted: { not: 'a list' } })),
      'malformed',
    );
  },
);

test('a compromised bundle key is recovered by a rotation: same pinned root, the old key refused', async () => {
  const s4 = await rotate4(r);
  const chain = [r.s2, r.s3, s4];
  const v = await verifyRootChain(k.root.publicKeyPem, chain, { minVersion: 3 });
  assert.ok(v.valid && v.rootVersion === 4 && v.bundleKeys[0]!.kid === (await jwkThumbprint(r.bk4.publicJwk)));
  const s = await sba();
  // The attacker holding bk3 signs a bundle with a newer sequence: refused under version 4.
  const forged = await bundleBy(k, r.bk3, { sequence: 99 });
  const good = await bundleBy(k, r.bk4, { sequence: 2 });
  assert.is(
    codeOf(
      await verifyCtl(s, {
        ...offline,
        trustBundles: [forged],
        rootPublicKeyPem: k.root.publicKeyPem,
        rootChain: chain,
      }),
    ),
    'trust_bundle_invalid',
  );
  assert.is(
    codeOf(
      await verifyCtl(s, { ...offline, trustBundles: [good], rootPublicKeyPem: k.root.publicKeyPem, rootChain: chain }),
    ),
    'valid',
  );
  assert.is(
    codeOf(await verifyTrustBundle(forged, k.root.publicKeyPem, { now, rootChain: chain })),
    'trust_bundle_invalid',
  );
});

test('a statement edited after signing is refused, and an in-place edit of a verified chain is seen', async () => {
  const swapped = clone(r.s3);
  swapped.bundleKeys = [
    { ...r.bk2.publicJwk, kid: await jwkThumbprint(r.bk2.publicJwk), alg: 'EdDSA' },
  ] as RootStatement['bundleKeys'];
  assert.is(codeOf(await verifyRootChain(k.root.publicKeyPem, [r.s2, swapped])), 'root_rotation_invalid');
  const lowered = clone(r.s3);
  lowered.threshold = 1;
  assert.is(codeOf(await verifyRootChain(k.root.publicKeyPem, [r.s2, lowered])), 'root_rotation_invalid');
  // The verifier caches the walk by the chain's bytes: editing the caller's objects changes the bytes.
  const s = await sba();
  const chain = clone([r.s2, r.s3]);
  const b2 = await bundleBy(k, r.bk2);
  const o = { ...offline, trustBundles: [b2], rootPublicKeyPem: k.root.publicKeyPem, rootChain: chain as unknown[] };
  assert.is(codeOf(await verifyCtl(s, o)), 'trust_bundle_invalid');
  chain[1]!.bundleKeys = swapped.bundleKeys;
  assert.is(codeOf(await verifyCtl(s, o)), 'root_rotation_invalid');
  chain.pop();
  assert.is(codeOf(await verifyCtl(s, o)), 'valid');
  // A chain that is not JSON at all is malformed, never a throw.
  const cyclic: unknown[] = [];
  cyclic.push(cyclic);
  assert.is(codeOf(await verifyCtl(s, { ...o, rootChain: cyclic })), 'malformed');
  assert.is(codeOf(await verifyCtl(s, { ...o, rootChain: [10n] as unknown[] })), 'malformed');
});

test('closed objects and value rules (PROTOCOL.md §3): malformed, never a throw', async () => {
  const kid = (x: { publicJwk: object }) => jwkThumbprint(x.publicJwk as never);
  const edits: Array<(s: any) => void> = [
    (s) => {
      s.extra = 1;
    },
    (s) => {
      s.keys[0].purposes = ['bundle'];
    },
    (s) => {
      s.threshold = 0;
    },
    (s) => {
      s.threshold = 4;
    },
    (s) => {
      s.rootVersion = 1;
    },
    (s) => {
      s.bundleKeys = [];
    },
    (s) => {
      s.keys[1] = { ...s.keys[0], kid: 'same-key-other-kid' };
    },
    (s) => {
      s.signatures.push({ ...s.signatures[0] });
    },
    (s) => {
      s.issuedAt = '2026-11-22T10:00:00+00:00';
    },
    (s) => {
      s.keys[0].alg = 'ES256';
    },
    (s) => {
      delete s.signatures;
    },
    (s) => {
      s.signatures = null;
    },
  ];
  for (const edit of edits) {
    const s3 = clone(r.s3);
    edit(s3);
    assert.is(codeOf(await verifyRootChain(k.root.publicKeyPem, [r.s2, s3])), 'malformed', edit.toString());
  }
  const v2 = clone(r.s3) as any;
  v2.version = 2;
  assert.is(codeOf(await verifyRootChain(k.root.publicKeyPem, [r.s2, v2])), 'unsupported_version');
  for (const junk of [undefined, null, 42, 'not json', '{}', [null], [{}], [[]], { length: 1, 0: r.s2 }]) {
    assert.is(codeOf(await verifyRootChain(k.root.publicKeyPem, junk)), 'malformed', String(junk));
  }
  for (const root of [undefined, 'not a pem', {}])
    assert.is(codeOf(await verifyRootChain(root as never, [r.s2])), 'malformed');
  assert.is(codeOf(await verifyRootChain(k.root.publicKeyPem, [r.s2], { minVersion: 0 })), 'malformed');
  assert.ok(await kid(r.a));
});

test('root keys held elsewhere (an HSM) sign as opaque SigningKeys: only sign() is called', async () => {
  const calls: number[] = [];
  const opaque = async (pem: string) => {
    const inner = await importSigningKey(pem);
    return {
      kind: 'signing' as const,
      alg: inner.alg,
      publicJwk: inner.publicJwk,
      sign: (m: Uint8Array) => (calls.push(m.length), inner.sign(m)),
    };
  };
  const s2 = await createRootStatement(
    { rootVersion: 2, keys: [r.r2.publicJwk], threshold: 1, bundleKeys: [r.bk2.publicJwk] },
    { signers: [{ key: await opaque(k.root.privateKeyPem) }, { key: await opaque(r.r2.privateKeyPem) }], now },
  );
  assert.is(calls.length, 2);
  const v = await verifyRootChain(k.root.publicKeyPem, [s2]);
  assert.ok(v.valid && v.rootVersion === 2);
});

test('a P-256 root set rotates the same way (PROTOCOL.md §11: any §3 key)', async () => {
  const p1 = await generateKeyPair({ alg: 'ES256' });
  const p2 = await generateKeyPair({ alg: 'ES256' });
  const s2 = await createRootStatement(
    { rootVersion: 2, keys: [p1.publicJwk, p2.publicJwk], threshold: 2, bundleKeys: [r.bk2.publicJwk] },
    { signers: [{ key: k.root.privateKeyPem }, { key: p1.privateKeyPem }, { key: p2.privateKeyPem }], now },
  );
  const s3 = await createRootStatement(
    { rootVersion: 3, keys: [p2.publicJwk], threshold: 1, bundleKeys: [r.bk3.publicJwk] },
    { signers: [{ key: p1.privateKeyPem }, { key: p2.privateKeyPem }], now },
  );
  assert.ok(s2.keys[0]!.alg === 'ES256' && s2.keys[0]!.y);
  const v = await verifyRootChain(k.root.publicKeyPem, [s2, s3]);
  assert.ok(v.valid && v.rootVersion === 3, JSON.stringify(v));
  const s3short = await createRootStatement(
    { rootVersion: 3, keys: [p2.publicJwk], threshold: 1, bundleKeys: [r.bk3.publicJwk] },
    { signers: [{ key: p2.privateKeyPem }], now },
  );
  assert.is(codeOf(await verifyRootChain(k.root.publicKeyPem, [s2, s3short])), 'root_rotation_invalid');
});

test.run();
