/**
 * A small fleet for the device tests: a root key (pinned on devices), an authority key published
 * in a Trust Bundle, a wallet key, and a grant with an offline allowance (PROTOCOL.md §8).
 * Written against any copy of the library (`CTL`), so the QuickJS and runtime tests reuse it.
 */
import type * as Sdk from '../../src/index.js';

export const T0 = Date.parse('2026-11-22T10:00:00Z');
export const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');
export const HOUR = 3_600_000;

export interface FleetOptions {
  offline?: { maxAmountMinor?: string; maxPayments?: number; maxBundleAgeMs?: number };
  maxAmountMinor?: string;
  bundleTtlMs?: number;
}

export async function makeFleet(CTL: typeof Sdk, o: FleetOptions = {}) {
  const root = await CTL.generateKeyPair({ alg: 'EdDSA' });
  const authority = await CTL.generateKeyPair({ alg: 'EdDSA' });
  const wallet = await CTL.generateKeyPair({ alg: 'EdDSA' });
  const issuer = 'authority.fleet.example';
  const kid = await CTL.jwkThumbprint(authority.publicJwk);
  const now = () => T0;
  /** `signer`: a bundle key of a rotated root (PROTOCOL.md §11); the version-1 root by default. */
  const bundle = (
    sequence: number,
    fields: {
      revokedGrants?: string[];
      issuedAt?: number;
      ttlMs?: number;
      scope?: Record<string, string>;
      signer?: { privateKeyPem: string };
    } = {},
  ) =>
    CTL.createTrustBundle(
      {
        sequence,
        scope: fields.scope ?? { category: 'ev-charging', region: 'eu' },
        issuers: [{ issuer, keys: [{ ...authority.publicJwk, kid, alg: 'EdDSA', purposes: ['grant'] }] }],
        revokedGrants: fields.revokedGrants ?? [],
        issuedAt: iso(fields.issuedAt ?? T0 - HOUR),
        expiresAt: iso((fields.issuedAt ?? T0 - HOUR) + (fields.ttlMs ?? o.bundleTtlMs ?? 24 * HOUR)),
      },
      { signingKey: (fields.signer ?? root).privateKeyPem, issuer: 'root.fleet.example' },
    );
  const grant = await CTL.createSignedPolicyGrant(
    {
      policyHash: CTL.policyHash({ purpose: 'charging', fleet: 'demo' }),
      actorKey: wallet.publicJwk,
      allowedRails: ['card'],
      allowedAssets: [{ standard: 'iso4217', code: 'EUR' }],
      maxAmountMinor: o.maxAmountMinor ?? '100000',
      currency: 'EUR',
      issuedAt: iso(T0 - 2 * HOUR),
      expiresAt: iso(T0 + 30 * 24 * HOUR),
      ...(o.offline ? { offline: o.offline } : {}),
    },
    {
      issuer,
      keyId: kid,
      signingKey: authority.privateKeyPem,
      revocationBaseUrl: 'https://authority.fleet.example',
      now,
    },
  );
  let n = 0;
  const sba = (amount: string, at = T0) =>
    CTL.createSignedSessionBudgetAuthorization(
      {
        grant,
        sessionId: 'sess_vehicle42',
        actorId: 'vehicle-42',
        maxAmountMinor: amount,
        budgetScope: 'TRIP',
        budgetId: `bud_${++n}_${amount}`,
        issuedAt: iso(at - 1000),
        expiresAt: iso(at + HOUR),
        rail: 'card',
      },
      { signingKey: wallet.privateKeyPem, keyId: 'vehicle-42-key', now: () => at },
    );
  return { root, authority, wallet, issuer, kid, grant, bundle, sba };
}
