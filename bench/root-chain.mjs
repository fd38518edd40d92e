#!/usr/bin/env node
// Per-payment cost of a rotated root (PROTOCOL.md §11): an offline verifyCtl whose bundle is signed
// by the version-4 bundle key and comes with a 3-statement chain (a 2-of-3 root set), against the
// same payment under the unrotated root (bundle signed by the pinned root, no chain), measured in
// the same run, interleaved. The verifier walks a chain once per distinct chain bytes, so the
// target is ≤ 1.2. Also: one cold verifyRootChain of that chain against one Ed25519 verify.
// Run: npm run build && node bench/root-chain.mjs   (BENCH_MS, BENCH_ROUNDS, BENCH_BACKEND as bundle-cache.mjs)
import { loadDist, opsPerSec, median, DURATION_MS, ROUNDS, ledgerThatForgets } from './lib/measure.mjs';

const CTL = await loadDist();
const BACKEND = process.env.BENCH_BACKEND ?? 'native';

const k = {};
for (const n of ['authority', 'actor', 'root', 'r2', 'a', 'b', 'c', 'bk2', 'bk3', 'bk4'])
  k[n] = await CTL.generateKeyPair({ alg: 'EdDSA' });
const by = (...names) => ({ signers: names.map((n) => ({ key: k[n].privateKeyPem })) });
const set = [k.a.publicJwk, k.b.publicJwk, k.c.publicJwk];
const chain = [
  await CTL.createRootStatement(
    { rootVersion: 2, keys: [k.r2.publicJwk], threshold: 1, bundleKeys: [k.bk2.publicJwk] },
    by('root', 'r2'),
  ),
  await CTL.createRootStatement(
    { rootVersion: 3, keys: set, threshold: 2, bundleKeys: [k.bk3.publicJwk] },
    by('r2', 'a', 'c'),
  ),
  await CTL.createRootStatement(
    { rootVersion: 4, keys: set, threshold: 2, bundleKeys: [k.bk4.publicJwk] },
    by('b', 'c'),
  ),
];
const kid = await CTL.jwkThumbprint(k.authority.publicJwk);
const now = Date.now();
const grant = await CTL.createSignedPolicyGrant(
  {
    policyHash: CTL.policyHash({ bench: 'root' }),
    actorKey: k.actor.publicJwk,
    allowedRails: ['x402'],
    allowedAssets: [{ standard: 'iso4217', code: 'USD' }],
    maxAmountMinor: '1000000000',
    currency: 'USD',
    expiresAt: CTL.formatTimestamp(now + 86400000),
  },
  {
    issuer: 'authority.bench',
    keyId: kid,
    signingKey: k.authority.privateKeyPem,
    revocationBaseUrl: 'https://authority.bench',
  },
);
const session = CTL.createSession(grant, {
  actorId: 'bench',
  signingKey: k.actor.privateKeyPem,
  fetch: async () => ({
    ok: true,
    status: 200,
    text: async () => JSON.stringify({ grantId: grant.grantId, revoked: false }),
  }),
});
const sba = await session.createSba({ amount: '1', currency: 'USD', rail: 'x402' });
const bundle = (signer) =>
  CTL.createTrustBundle(
    {
      sequence: 1,
      scope: {},
      revokedGrants: [],
      expiresAt: CTL.formatTimestamp(now + 86400000),
      issuers: [
        { issuer: 'authority.bench', keys: [{ ...k.authority.publicJwk, kid, alg: 'EdDSA', purposes: ['grant'] }] },
      ],
    },
    { signingKey: k[signer].privateKeyPem, issuer: 'root.bench' },
  );

CTL.setCryptoBackend(BACKEND);
const base = {
  amount: '1',
  currency: 'USD',
  offline: true,
  spendStorage: ledgerThatForgets,
  rootPublicKeyPem: k.root.publicKeyPem,
};
const plain = { ...base, trustBundles: [await bundle('root')] };
const rotated = { ...base, trustBundles: [await bundle('bk4')], rootChain: chain, minRootVersion: 4 };
const pay = (o) => async () => {
  const r = await CTL.verifyCtl(sba, o);
  if (!r.valid) throw new Error('bench: verifyCtl refused: ' + JSON.stringify(r.error));
};
await pay(plain)();
await pay(rotated)();
const walk = async () => {
  const r = await CTL.verifyRootChain(k.root.publicKeyPem, chain);
  if (!r.valid) throw new Error('bench: chain refused');
};
const msg = new Uint8Array(200);
const sig = await (await CTL.importSigningKey(k.root.privateKeyPem)).sign(msg);
const one = async () => {
  await CTL.verifyWithJwk(k.root.publicJwk, msg, sig);
};

const p = [],
  r = [],
  w = [],
  v = [];
for (let i = 0; i < ROUNDS; i++) {
  p.push(await opsPerSec(pay(plain)));
  r.push(await opsPerSec(pay(rotated)));
  w.push(await opsPerSec(walk));
  v.push(await opsPerSec(one));
}
const ratio = median(p) / median(r);
console.log(
  `CTL root chain bench (node ${process.version}, ${BACKEND} backend, ${DURATION_MS} ` +
    `ms × ${ROUNDS} interleaved rounds, medians)`,
);
console.log(`  verifyCtl, rotated root (version 4, 3 statements):   ${Math.round(median(r))}/s`);
console.log(`  verifyCtl, unrotated root:                           ${Math.round(median(p))}/s`);
console.log(`  per-payment time ratio (rotated ÷ unrotated): ${ratio.toFixed(2)}   target ≤ 1.2`);
console.log(
  `  cold verifyRootChain (3 statements, 8 signatures) ÷ one Ed25519 verify: ${(median(v) / median(w)).toFixed(1)}`,
);
if (process.env.BENCH_JSON)
  console.log(
    JSON.stringify({
      backend: BACKEND,
      rotated: median(r),
      plain: median(p),
      ratio,
      walkPerVerify: median(v) / median(w),
    }),
  );
