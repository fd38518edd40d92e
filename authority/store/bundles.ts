/**
 * Trust Bundles: per-scope sequences, issuing the next bundle of a scope as one serialized unit
 * (sequence, revoked ids, keys and people read in the transaction that stores it), and the newest
 * bundle of each matching scope. Plain SQL shared by SQLite and PostgreSQL, mixed into the
 * AuthorityStore by sql-store.ts.
 */
import { changeWith, type SqlDatabase, type SqlExecutor } from '../../service-kit/index.js';
import { activeHumans } from './humans.js';
import { revokedGrantIds } from './revocations.js';
import { signingKeys } from './signing-keys.js';
import type { AuthorityStore, BundleRecord, BundleScopeFields } from './types.js';

export type BundleStore = Pick<AuthorityStore, 'nextBundleSequence' | 'putBundle' | 'issueBundle' | 'latestBundles'>;

type BundleRow = {
  bundle_id: string;
  scope_key: string;
  category: string | null;
  merchant: string | null;
  region: string | null;
  sequence: number | string;
  issued_at: string;
  expires_at_ms: number | string;
  bundle_json: string;
};

const bundleFrom = (r: BundleRow): BundleRecord => {
  const scope: BundleScopeFields = {};
  if (r.category !== null) scope.category = r.category;
  if (r.merchant !== null) scope.merchant = r.merchant;
  if (r.region !== null) scope.region = r.region;
  return {
    bundleId: r.bundle_id,
    scopeKey: r.scope_key,
    scope,
    sequence: Number(r.sequence),
    issuedAt: r.issued_at,
    expiresAtMs: Number(r.expires_at_ms),
    bundle: r.bundle_json,
  };
};

async function nextSequence(q: SqlExecutor, scopeKey: string): Promise<number> {
  const r = await q.get<{ seq: number | string }>(
    `INSERT INTO bundle_sequences (scope_key, seq) VALUES (?, 1)
     ON CONFLICT (scope_key) DO UPDATE SET seq = bundle_sequences.seq + 1 RETURNING seq`,
    [scopeKey],
  );
  return Number(r!.seq);
}

async function insertBundle(q: SqlExecutor, b: BundleRecord): Promise<void> {
  await q.run(
    `INSERT INTO bundles (bundle_id, scope_key, category, merchant, region, sequence, issued_at, expires_at_ms,
      bundle_json)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      b.bundleId,
      b.scopeKey,
      b.scope.category ?? null,
      b.scope.merchant ?? null,
      b.scope.region ?? null,
      b.sequence,
      b.issuedAt,
      b.expiresAtMs,
      b.bundle,
    ],
  );
}

export function createBundleStore(db: SqlDatabase): BundleStore {
  return {
    nextBundleSequence: (scopeKey) => nextSequence(db, scopeKey),
    putBundle: (b) => insertBundle(db, b),
    issueBundle(scopeKey, nowMs, sign, effect) {
      // PostgreSQL: an advisory lock per scope, held to commit, so the reads below see every
      // change committed before the previous bundle of this scope was stored. SQLite: BEGIN
      // IMMEDIATE holds the only writer lock, and this process's other statements wait for the
      // transaction (service-kit/database.ts). `sign` is pure (no store access): an Ed25519 or
      // P-256 signature, so the lock is held for a few statements and one signature.
      return changeWith(
        db,
        async (q) => {
          const sequence = await nextSequence(q, scopeKey);
          const revoked = await revokedGrantIds(q, nowMs);
          const keys = await signingKeys(q);
          const humans = await activeHumans(q);
          const signed = await sign({ sequence, revokedGrantIds: revoked, signingKeys: keys, humans });
          const record: BundleRecord = { ...signed, scopeKey, sequence };
          await insertBundle(q, record);
          return record;
        },
        effect,
        { lock: `ctl_bundle:${scopeKey}` },
      );
    },
    async latestBundles(filter, nowMs) {
      const where: string[] = [];
      const params: unknown[] = [];
      for (const f of ['category', 'merchant', 'region'] as const) {
        if (filter[f] !== undefined) {
          where.push(`(b.${f} IS NULL OR b.${f} = ?)`);
          params.push(filter[f]);
        }
      }
      params.push(nowMs);
      const rows = await db.all<BundleRow>(
        `SELECT b.* FROM bundles b
         JOIN (SELECT scope_key, MAX(sequence) AS seq FROM bundles GROUP BY scope_key) newest
           ON newest.scope_key = b.scope_key AND newest.seq = b.sequence
         WHERE ${where.length ? where.join(' AND ') + ' AND ' : ''}b.expires_at_ms > ?
         ORDER BY b.scope_key`,
        params,
      );
      return rows.map(bundleFrom);
    },
  };
}
