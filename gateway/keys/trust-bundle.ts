/**
 * The gateway's Trust Bundle (spec §4.1, PROTOCOL.md §4, §12): the grant and receipt keys and
 * every revoked session grant not long expired, signed by the bundle root. One signed bundle per
 * sequence, stored, so every instance on a database serves the same bytes for a sequence; the
 * sequence is the database counter raised with each revocation and key change, so no instance
 * ever publishes out of order. Each request reads the counter (one primary-key read), so a
 * revocation committed by any instance is in the next bundle any instance serves.
 */
import { createTrustBundle, formatTimestamp, type SigningKey } from '../../src/index.js';
import type { SqlDatabase, SqlExecutor } from '../../service-kit/index.js';
import {
  bundleSequence,
  raiseBundleSequence,
  storedBundle,
  storeBundle,
  type StoredBundle,
} from './bundle-sequence.js';

/**
 * How long a revoked grant stays listed after it expires: a verifier with a clock tolerance or a
 * slow clock would accept an expired grant inside that margin (as the authority's bundles do).
 */
export const REVOKED_AFTER_EXPIRY_MS = 86_400_000;

export interface TrustBundleOptions {
  db: SqlDatabase;
  issuer: string;
  now: () => number;
  /**
   * A bundle older than this is re-issued (new `issuedAt`, expired grants dropped) under a new sequence (default 60 s).
   */
  refreshMs?: number;
  /** `expiresAt` − `issuedAt` (default 24 h). */
  lifetimeMs?: number;
  /** The signer of a stored key (KeyRing.signerOf: opens the sealed private key, or an external key). */
  signerOf: (kid: string, privatePem: string) => Promise<SigningKey>;
}

export function createTrustBundlePublisher(o: TrustBundleOptions) {
  const refreshMs = o.refreshMs ?? 60_000;
  const lifetimeMs = o.lifetimeMs ?? 24 * 3600_000;
  let served: StoredBundle | undefined;
  const fresh = (b: StoredBundle | undefined, at: number): b is StoredBundle => !!b && at - b.issuedAt < refreshMs;

  // Under one lock across instances: the counter is read first, then what the bundle lists, so the
  // bundle of sequence n carries every change committed with a sequence ≤ n.
  function issue(): Promise<StoredBundle> {
    return o.db.tx(
      async (q) => {
        const at = o.now();
        let sequence = await bundleSequence(q);
        const existing = await storedBundle(q, sequence);
        if (fresh(existing, at)) return existing;
        if (existing) sequence = await raiseBundleSequence(q);
        const body = await sign(q, sequence, at);
        const b = { sequence, issuedAt: at, body };
        await storeBundle(q, b);
        return b;
      },
      { lock: 'gw_trust_bundle' },
    );
  }

  async function sign(q: SqlExecutor, sequence: number, at: number): Promise<unknown> {
    const keys = await q.all<{ kid: string; purpose: string; status: string; public_jwk: string; private_pem: string }>(
      `SELECT kid, purpose, status, public_jwk, private_pem FROM gw_keys ORDER BY created_at, kid`,
    );
    const root = keys.find((k) => k.purpose === 'bundle' && k.status === 'active');
    if (!root) throw new Error('no active bundle key');
    const signer = o.signerOf(root.kid, root.private_pem);
    const revoked = await q.all<{ grant_id: string }>(
      `SELECT grant_id FROM gw_sessions WHERE state = 'revoked' AND expires_at > ? ORDER BY grant_id`,
      [at - REVOKED_AFTER_EXPIRY_MS],
    );
    const published = keys
      .filter((k) => k.purpose !== 'bundle')
      .map((k) => ({ ...JSON.parse(k.public_jwk), kid: k.kid, alg: 'EdDSA', purposes: [k.purpose] }));
    return createTrustBundle(
      {
        sequence,
        scope: {},
        issuers: [{ issuer: o.issuer, keys: published }],
        revokedGrants: revoked.map((r) => r.grant_id),
        expiresAt: formatTimestamp(at + lifetimeMs),
      },
      { signingKey: await signer, keyId: root.kid, issuer: o.issuer, now: () => at },
    );
  }

  return {
    /** The bundle to serve now. */
    async current(): Promise<unknown> {
      const at = o.now();
      const sequence = await bundleSequence(o.db);
      let b: StoredBundle | undefined = served?.sequence === sequence ? served : await storedBundle(o.db, sequence);
      if (!fresh(b, at)) b = await issue();
      served = b;
      return b.body;
    },
  };
}
