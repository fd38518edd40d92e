/**
 * Shared, fixed material for the property tests: keys made once per process (node:crypto, so
 * both SDK backends read the same PEMs), and a valid grant / SBA / bundle / receipt to mutate.
 */
import { generateKeyPairSync } from 'node:crypto';
import type { CtlCrypto } from '../../src/crypto/types.js';
import { createGrantWith, type GrantFields } from '../../src/artifacts/grant.js';
import { createSbaWith } from '../../src/artifacts/sba.js';
import { createBundleWith } from '../../src/artifacts/bundle.js';
import { signReceiptWith } from '../../src/artifacts/receipt.js';
import { policyHash } from '../../src/index.js';

export interface TestKey {
  alg: 'EdDSA' | 'ES256';
  privateKeyPem: string;
  publicKeyPem: string;
}

export function makeKey(alg: 'EdDSA' | 'ES256'): TestKey {
  const k = alg === 'EdDSA' ? generateKeyPairSync('ed25519') : generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return {
    alg,
    privateKeyPem: k.privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
    publicKeyPem: k.publicKey.export({ format: 'pem', type: 'spki' }).toString(),
  };
}

export const NOW = Date.parse('2026-06-01T00:00:00Z');
export const now = () => NOW;
export const ISSUER = 'authority.example';

export function baseGrantFields(actorKeyPem: string, over: Partial<GrantFields> = {}): GrantFields {
  return {
    grantId: 'grant-prop-1',
    policyHash: policyHash({ p: 1 }),
    issuedAt: '2026-05-01T00:00:00Z',
    expiresAt: '2026-12-01T00:00:00Z',
    allowedRails: ['x402', 'card'],
    allowedAssets: [{ standard: 'iso4217', code: 'USD' }],
    allowedPurposes: ['ev:*'],
    maxAmountMinor: '5000',
    currency: 'USD',
    destinationAllowlist: ['merchant-a', 'merchant-b'],
    revocationUrl: 'https://authority.example/revoke?grantId=grant-prop-1',
    actorKey: actorKeyPem,
    ...over,
  };
}

export interface Material {
  authority: TestKey;
  actor: TestKey;
  root: TestKey;
  gateway: TestKey;
  grant: any;
  sba: any;
  bundle: any;
  receipt: any;
}

/** One valid artifact of each type, signed with `c`. */
export async function material(c: CtlCrypto): Promise<Material> {
  const authority = makeKey('EdDSA');
  const actor = makeKey('EdDSA');
  const root = makeKey('EdDSA');
  const gateway = makeKey('EdDSA');
  const grant = await createGrantWith(c, baseGrantFields(actor.publicKeyPem), {
    issuer: ISSUER,
    keyId: 'authority-1',
    signingKey: authority.privateKeyPem,
  });
  const sba = await createSbaWith(
    c,
    {
      grant,
      sessionId: 'sess-1',
      actorId: 'vehicle-42',
      maxAmountMinor: '30',
      budgetId: 'bud-1',
      issuedAt: '2026-05-31T23:55:00Z',
      expiresAt: '2026-06-01T00:05:00Z',
      rail: 'x402',
      merchantId: 'merchant-a',
      purpose: 'ev:charging',
      issuer: ISSUER,
    },
    { signingKey: actor.privateKeyPem, keyId: 'actor-1', now },
  );
  const authorityJwk = await c.toPublicJwk(authority.publicKeyPem);
  const bundle = await createBundleWith(
    c,
    {
      bundleId: 'bndl-1',
      sequence: 3,
      scope: { region: 'eu' },
      revokedGrants: [],
      issuers: [{ issuer: ISSUER, keys: [{ ...authorityJwk, kid: 'authority-1', alg: 'EdDSA', purposes: ['grant'] }] }],
      issuedAt: '2026-05-15T00:00:00Z',
      expiresAt: '2026-09-01T00:00:00Z',
    },
    { signingKey: root.privateKeyPem, keyId: 'root-1', issuer: 'fleet.example' },
  );
  const receipt = await signReceiptWith(
    c,
    {
      receiptId: 'rcpt_1',
      sessionId: 'gw_sess_1',
      grantId: grant.grantId,
      purpose: 'ev:charging',
      amount: { amountMinor: '30', currency: 'USD' },
      merchant: 'merchant-a',
      paidAt: '2026-05-31T23:58:00Z',
      txRef: 'txid:abc',
      rail: 'x402',
      sba,
    },
    { signingKey: gateway.privateKeyPem, keyId: 'gateway-1' },
  );
  return { authority, actor, root, gateway, grant, sba, bundle, receipt };
}

/** A fetch answering the revocation check "not revoked" for `grantId`. */
export function notRevokedFetch(grantId: string) {
  return async () => ({ ok: true, status: 200, text: async () => JSON.stringify({ grantId, revoked: false }) });
}

/**
 * A property's run count by tier: `npm test` runs a quarter of the long ones (every property, a
 * shorter search), `npm run test:slow` all of them (the .slow.test.ts twins set CTL_TEST_LONG).
 * @example runs(7000) // 1750 under npm test, 7000 under test:slow
 */
export const runs = (n: number) => (process.env['CTL_TEST_LONG'] === '1' ? n : Math.ceil(n / 4));

/** fast-check parameters: explicit run count, and the seed printed with every failure. */
export function params(numRuns: number) {
  return { numRuns, verbose: 1 as const, includeErrorInReport: true };
}
