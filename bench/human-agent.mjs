#!/usr/bin/env node
// The Human-Agent profile's cost (PROTOCOL.md §10), as ratios against baselines measured in the
// same run. Run: npm run build && node bench/human-agent.mjs
//
//   verifyCtl under a person's grant (key from the did:key, trustedHumans, intentHash always
//     recomputed) ÷ verifyCtl under an authority grant (signingKeyPem, requireIntentHash): the
//     price of resolving the key from the DID, per payment, once the grant signature is cached
//   didKeyToJwk (fresh, uncached) for Ed25519 and P-256 ÷ one bare node:crypto Ed25519 verify:
//     what a verifier pays the first time it meets a DID (P-256: a square root mod p)
import crypto from 'node:crypto';
import { loadDist, compare as compareRows, ledgerThatForgets } from './lib/measure.mjs';

const CTL = await loadDist();
const compare = (label, baseline, subject) => compareRows(label, baseline, subject, 60);

const now = Date.now();
const agent = await CTL.generateKeyPair({ alg: 'EdDSA' });
const fields = {
  policyHash: CTL.policyHash({ bench: true }),
  actorKey: agent.publicJwk,
  allowedRails: ['x402'],
  allowedAssets: [{ standard: 'iso4217', code: 'EUR' }],
  allowedPurposes: ['travel:booking'],
  maxAmountMinor: '1000000000',
  currency: 'EUR',
  expiresAt: CTL.formatTimestamp(now + 3600_000),
};
const pay = {
  amount: '100',
  currency: 'EUR',
  merchantId: 'hotel.example',
  rail: 'x402',
  purpose: 'travel:booking',
  offline: true,
  spendStorage: ledgerThatForgets,
};
async function sbaUnder(grant) {
  return CTL.createSignedSessionBudgetAuthorization(
    {
      grant,
      sessionId: 's',
      actorId: 'a',
      maxAmountMinor: '100',
      merchantId: 'hotel.example',
      rail: 'x402',
      purpose: 'travel:booking',
    },
    { signingKey: agent.privateKeyPem },
  );
}
const authority = await CTL.generateKeyPair({ alg: 'EdDSA' });
const plain = await sbaUnder(
  await CTL.createSignedPolicyGrant(fields, {
    issuer: 'authority.example',
    signingKey: authority.privateKeyPem,
    revocationBaseUrl: 'https://a.example',
  }),
);
for (const alg of ['EdDSA', 'ES256']) {
  const person = await CTL.generateKeyPair({ alg });
  const did = CTL.didKeyFromJwk(person.publicJwk);
  const human = await sbaUnder(
    await CTL.createSignedPolicyGrant(
      { ...fields, profile: 'human-agent' },
      { signingKey: person.privateKeyPem, revocationBaseUrl: 'https://a.example' },
    ),
  );
  const a = await CTL.verifyCtl(human, { ...pay, trustedHumans: [did] });
  if (!a.valid) throw new Error(JSON.stringify(a));
  await compare(
    `verifyCtl, ${alg} person's grant ÷ authority grant`,
    () => CTL.verifyCtl(plain, { ...pay, signingKeyPem: authority.publicKeyPem, requireIntentHash: true }),
    () => CTL.verifyCtl(human, { ...pay, trustedHumans: [did] }),
  );
}
const edKey = crypto.generateKeyPairSync('ed25519');
const msg = Buffer.from('bench');
const sig = crypto.sign(null, msg, edKey.privateKey);
for (const alg of ['EdDSA', 'ES256']) {
  const dids = await Promise.all(
    Array.from({ length: 64 }, async () => CTL.didKeyFromJwk((await CTL.generateKeyPair({ alg })).publicJwk)),
  );
  let i = 0;
  await compare(
    `didKeyToJwk (${alg}) ÷ one bare node:crypto Ed25519 verify`,
    () => crypto.verify(null, msg, edKey.publicKey, sig),
    () => CTL.didKeyToJwk(dids[i++ % dids.length]),
  );
}
