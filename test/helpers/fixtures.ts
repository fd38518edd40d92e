/** Keys, a grant and a fake authority (revocation + JWKS over an injected fetch) for SDK tests. */
import {
  generateKeyPair,
  createSignedPolicyGrant,
  createTrustBundle,
  jwkThumbprint,
  policyHash,
  formatTimestamp,
  type GrantFields,
  type PolicyGrant,
  type PublishedJwk,
} from '../../src/index.js';

export const HOUR = 3_600_000;
export const T0 = Date.UTC(2026, 10, 22, 10, 0, 0);

export async function keys() {
  const authority = await generateKeyPair({ alg: 'EdDSA' });
  const actor = await generateKeyPair({ alg: 'EdDSA' });
  const actorP256 = await generateKeyPair({ alg: 'ES256' });
  const root = await generateKeyPair({ alg: 'EdDSA' });
  const authorityKid = await jwkThumbprint(authority.publicJwk);
  return { authority, actor, actorP256, root, authorityKid };
}
export type Keys = Awaited<ReturnType<typeof keys>>;

export const policy = { version: 1, budget: { amount: '5000', currency: 'USD' }, purposes: ['api:*', 'ev:charging'] };

export async function grant(k: Keys, over: Partial<GrantFields> = {}, now = T0): Promise<PolicyGrant> {
  return createSignedPolicyGrant(
    {
      policyHash: policyHash(policy),
      actorKey: k.actor.publicJwk,
      allowedRails: ['x402', 'card'],
      allowedAssets: [{ standard: 'iso4217', code: 'USD' }],
      allowedPurposes: ['api:*', 'ev:charging'],
      maxAmountMinor: '5000',
      currency: 'USD',
      destinationAllowlist: ['merchant-a', 'merchant-b'],
      expiresAt: formatTimestamp(now + 24 * HOUR),
      issuedAt: formatTimestamp(now - 1000),
      ...over,
    },
    {
      issuer: 'authority.test',
      keyId: k.authorityKid,
      signingKey: k.authority.privateKeyPem,
      revocationBaseUrl: 'https://authority.test',
    },
  );
}

export function authorityJwks(k: Keys): { keys: PublishedJwk[] } {
  return {
    keys: [{ ...k.authority.publicJwk, kid: k.authorityKid, alg: 'EdDSA', purposes: ['grant'], status: 'active' }],
  };
}

export async function bundle(
  k: Keys,
  over: { revokedGrants?: string[]; sequence?: number; expiresAt?: string; issuedAt?: string } = {},
  now = T0,
) {
  return createTrustBundle(
    {
      sequence: over.sequence ?? 1,
      scope: { category: 'ev-charging' },
      issuers: [{ issuer: 'authority.test', keys: authorityJwks(k).keys }],
      revokedGrants: over.revokedGrants ?? [],
      issuedAt: over.issuedAt ?? formatTimestamp(now - 1000),
      expiresAt: over.expiresAt ?? formatTimestamp(now + 24 * HOUR),
    },
    { signingKey: k.root.privateKeyPem, issuer: 'root.test' },
  );
}

/**
 * A newer bundle (sequence 2, same scope) in which the authority's grant key was rotated to a fresh one: the current
 * key is dropped.
 */
export async function rotatedKeyBundle(k: Keys, now = T0) {
  const rotated = await generateKeyPair({ alg: 'EdDSA' });
  return createTrustBundle(
    {
      sequence: 2,
      scope: { category: 'ev-charging' },
      revokedGrants: [],
      issuers: [
        {
          issuer: 'authority.test',
          keys: [
            { ...rotated.publicJwk, kid: await jwkThumbprint(rotated.publicJwk), alg: 'EdDSA', purposes: ['grant'] },
          ],
        },
      ],
      issuedAt: formatTimestamp(now - 1000),
      expiresAt: formatTimestamp(now + 24 * HOUR),
    },
    { signingKey: k.root.privateKeyPem, issuer: 'root.test' },
  );
}

/** A fake authority behind an injected fetch: counts calls, can revoke, fail or stall. */
export function fakeAuthority(k: Keys) {
  const revoked = new Set<string>();
  const state = { calls: 0, jwksCalls: 0, fail: false, stallMs: 0 };
  const fetch = async (url: string) => {
    const u = new URL(url);
    if (state.stallMs) await new Promise((r) => setTimeout(r, state.stallMs));
    if (state.fail) throw new Error('connection refused');
    if (u.pathname === '/.well-known/ctl-keys.json') {
      state.jwksCalls++;
      return { ok: true, status: 200, text: async () => JSON.stringify(authorityJwks(k)) };
    }
    state.calls++;
    const grantId = u.searchParams.get('grantId')!;
    return { ok: true, status: 200, text: async () => JSON.stringify({ grantId, revoked: revoked.has(grantId) }) };
  };
  return { fetch, revoke: (id: string) => revoked.add(id), state };
}
