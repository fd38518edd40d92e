#!/usr/bin/env node
// Per-payment cost of a terminal that reuses one large Trust Bundle (PROTOCOL.md §12: the verifier
// trusts bytes it verified, never a JavaScript object). Ratio of one offline verifyCtl with a
// bundle of 10,000 revoked grants to one with a bundle of none, measured in the same run,
// interleaved. Target: ≤ 1.5. Run: npm run build && node bench/bundle-cache.mjs
//   BENCH_MS (per round, default 700), BENCH_ROUNDS (default 5), BENCH_REVOKED (default 10000),
//   BENCH_BACKEND (native | noble, default native)
import { loadDist, opsPerSec, median, DURATION_MS, ROUNDS, ledgerThatForgets } from './lib/measure.mjs';

const CTL = await loadDist();
const REVOKED = Number(process.env.BENCH_REVOKED ?? 10_000);
const BACKEND = process.env.BENCH_BACKEND ?? 'native';

// Fixture: root, authority, actor, one grant, one SBA, two bundles that differ only in revokedGrants.
const authority = await CTL.generateKeyPair({ alg: 'EdDSA' });
const actor = await CTL.generateKeyPair({ alg: 'EdDSA' });
const rootKey = await CTL.generateKeyPair({ alg: 'EdDSA' });
const kid = await CTL.jwkThumbprint(authority.publicJwk);
const now = Date.now();
const grant = await CTL.createSignedPolicyGrant(
  {
    policyHash: CTL.policyHash({ budget: { amount: '1000000000', currency: 'USD' } }),
    actorKey: actor.publicJwk,
    allowedRails: ['x402'],
    allowedAssets: [{ standard: 'iso4217', code: 'USD' }],
    maxAmountMinor: '1000000000',
    currency: 'USD',
    destinationAllowlist: ['merchant-a'],
    expiresAt: CTL.formatTimestamp(now + 86400000),
  },
  {
    issuer: 'authority.bench',
    keyId: kid,
    signingKey: authority.privateKeyPem,
    revocationBaseUrl: 'https://authority.bench',
  },
);
const session = CTL.createSession(grant, {
  actorId: 'bench',
  signingKey: actor.privateKeyPem,
  fetch: async () => ({
    ok: true,
    status: 200,
    text: async () => JSON.stringify({ grantId: grant.grantId, revoked: false }),
  }),
});
const sba = await session.createSba({ amount: '1', currency: 'USD', rail: 'x402', merchantId: 'merchant-a' });
const makeBundle = (revokedGrants) =>
  CTL.createTrustBundle(
    {
      sequence: 1,
      scope: { category: 'bench' },
      revokedGrants,
      issuers: [
        { issuer: 'authority.bench', keys: [{ ...authority.publicJwk, kid, alg: 'EdDSA', purposes: ['grant'] }] },
      ],
      expiresAt: CTL.formatTimestamp(now + 86400000),
    },
    { signingKey: rootKey.privateKeyPem, issuer: 'root.bench' },
  );
const empty = await makeBundle([]);
const large = await makeBundle(
  Array.from({ length: REVOKED }, (_, i) => `grant_revoked_${String(i).padStart(8, '0')}_${'x'.repeat(16)}`),
);

CTL.setCryptoBackend(BACKEND);
const opts = (bundle) => ({
  amount: '1',
  currency: 'USD',
  merchantId: 'merchant-a',
  offline: true,
  spendStorage: ledgerThatForgets,
  trustBundles: [bundle],
  rootPublicKeyPem: rootKey.publicKeyPem,
});
const withEmpty = opts(empty);
const withLarge = opts(large);
const pay = (o) => async () => {
  const r = await CTL.verifyCtl(sba, o);
  if (!r.valid) throw new Error('bench: verifyCtl refused: ' + JSON.stringify(r.error));
};
await pay(withEmpty)();
await pay(withLarge)();

const b = [],
  s = [];
for (let r = 0; r < ROUNDS; r++) {
  b.push(await opsPerSec(pay(withEmpty)));
  s.push(await opsPerSec(pay(withLarge)));
}
const ratio = median(b) / median(s); // time per payment, large ÷ empty
console.log(
  `CTL bundle cache bench (node ${process.version}, ${BACKEND} backend, ${DURATION_MS} ` +
    `ms × ${ROUNDS} interleaved rounds, medians)`,
);
console.log(`  verifyCtl, bundle with ${REVOKED} revoked grants: ${Math.round(median(s))}/s`);
console.log(`  verifyCtl, bundle with none:                ${Math.round(median(b))}/s`);
console.log(`  per-payment time ratio (large ÷ empty): ${ratio.toFixed(2)}   target ≤ 1.5`);
if (process.env.BENCH_JSON)
  console.log(JSON.stringify({ revoked: REVOKED, backend: BACKEND, large: median(s), empty: median(b), ratio }));
