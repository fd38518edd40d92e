/**
 * A root grant with one delegation whose link carries an hourly window (PROTOCOL.md §13, §14), and
 * SBAs signed under it at a chosen time: the shape that once let one SBA be accepted once per
 * window. Written against any copy of the library, so the built bundles and QuickJS reuse it.
 */
import type * as Sdk from '../../src/index.js';

export const T0 = Date.UTC(2026, 10, 22, 10, 0, 0);
export const MINUTE = 60_000;
export const HOUR = 3_600_000;
export const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');

export async function windowedChain(CTL: typeof Sdk) {
  const root = await CTL.generateKeyPair({ alg: 'EdDSA' });
  const authority = await CTL.generateKeyPair({ alg: 'EdDSA' });
  const owner = await CTL.generateKeyPair({ alg: 'EdDSA' });
  const sub = await CTL.generateKeyPair({ alg: 'EdDSA' });
  const issuer = 'authority.windows.example';
  const kid = await CTL.jwkThumbprint(authority.publicJwk);
  const grant = await CTL.createSignedPolicyGrant(
    {
      policyHash: CTL.policyHash({ fleet: 'windows' }),
      actorKey: owner.publicJwk,
      allowedRails: ['card'],
      allowedAssets: [{ standard: 'iso4217', code: 'EUR' }],
      maxAmountMinor: '100000',
      currency: 'EUR',
      issuedAt: iso(T0 - 2 * HOUR),
      expiresAt: iso(T0 + 30 * 24 * HOUR),
      delegation: { maxDepth: 1 },
      offline: { maxAmountMinor: '100000', maxPayments: 1000 },
    },
    { issuer, keyId: kid, signingKey: authority.privateKeyPem, revocationBaseUrl: `https://${issuer}`, now: () => T0 },
  );
  // The link's hours start on the hour: 10:58 and 11:00 fall in two windows.
  const link = await CTL.createDelegation(
    grant,
    {
      actorKey: sub.publicJwk,
      delegationId: 'dlg-hourly',
      maxAmountMinor: '50000',
      issuedAt: iso(T0 - HOUR),
      expiresAt: iso(T0 + 29 * 24 * HOUR),
      windows: [{ every: 'PT1H', maxAmountMinor: '10000' }],
      windowsStart: iso(T0 - HOUR),
    },
    { signingKey: owner.privateKeyPem, now: () => T0 },
  );
  const bundle = await CTL.createTrustBundle(
    {
      sequence: 1,
      scope: { category: 'ev-charging' },
      issuers: [{ issuer, keys: [{ ...authority.publicJwk, kid, alg: 'EdDSA', purposes: ['grant'] }] }],
      revokedGrants: [],
      issuedAt: iso(T0 - 2 * HOUR),
      expiresAt: iso(T0 + 7 * 24 * HOUR),
    },
    { signingKey: root.privateKeyPem, issuer: 'root.windows.example' },
  );
  let n = 0;
  /** An SBA of `amount` under the link, signed at `at`, valid `ttlMs`. */
  const sba = (amount: string, at: number, ttlMs: number, o: { hold?: boolean; budgetId?: string } = {}) =>
    CTL.createSignedSessionBudgetAuthorization(
      {
        grant: link,
        sessionId: 'sess_sub',
        actorId: 'sub-agent',
        maxAmountMinor: amount,
        budgetScope: 'TRIP',
        budgetId: o.budgetId ?? `bud_w${++n}`,
        issuedAt: iso(at),
        expiresAt: iso(at + ttlMs),
        rail: 'card',
        ...(o.hold ? { hold: true } : {}),
      },
      { signingKey: sub.privateKeyPem, now: () => at },
    );
  return { root, authority, owner, sub, grant, link, bundle, sba };
}
