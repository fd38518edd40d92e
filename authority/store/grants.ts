/**
 * Signed grants: stored, read, listed and soft-deleted (revocation is revocations.ts). Plain SQL
 * shared by SQLite and PostgreSQL, mixed into the AuthorityStore by sql-store.ts.
 */
import { changeWith, type SqlDatabase } from '../../service-kit/index.js';
import { GRANT_CHANNEL } from './revocations.js';
import type { RevocationCache } from './revocation-cache.js';
import type { AuthorityStore, GrantRecord, StoredGrant } from './types.js';

export type GrantStore = Pick<AuthorityStore, 'putGrant' | 'getGrant' | 'listGrants' | 'softDeleteGrant'>;

type GrantRow = {
  grant_id: string;
  policy_hash: string;
  key_id: string;
  grant_json: string;
  issued_at: string;
  expires_at_ms: number | string;
  created_by: string;
  revoked_at: string | null;
  revoked_by: string | null;
  revoke_reason: string | null;
  deleted_at: string | null;
};

const grantFrom = (r: GrantRow): StoredGrant => ({
  grantId: r.grant_id,
  policyHash: r.policy_hash,
  keyId: r.key_id,
  grant: r.grant_json,
  issuedAt: r.issued_at,
  expiresAtMs: Number(r.expires_at_ms),
  createdBy: r.created_by,
  revokedAt: r.revoked_at,
  revokedBy: r.revoked_by,
  revokeReason: r.revoke_reason,
  deletedAt: r.deleted_at,
});

/** `cache`: the process's revocation cache (revocations.ts), which may hold "unknown" for a new grant. */
export function createGrantStore(db: SqlDatabase, cache: RevocationCache): GrantStore {
  const postgres = db.dialect === 'postgres';
  return {
    async putGrant(g: GrantRecord, effect) {
      const insert =
        'INSERT INTO grants (grant_id, policy_hash, key_id, grant_json, issued_at, expires_at_ms, ' +
        'created_by) VALUES (?, ?, ?, ?, ?, ?, ?)';
      const values = [g.grantId, g.policyHash, g.keyId, g.grant, g.issuedAt, g.expiresAtMs, g.createdBy];
      // A process may hold "unknown grant" for this id: the insert tells every process, in the
      // same statement (one round trip, notification at its commit). Not waited for: a stale
      // "unknown" refuses a good grant for a moment, it never accepts a revoked one.
      await changeWith(
        db,
        async (q) => {
          if (postgres) {
            await q.get(`WITH g AS (${insert} RETURNING grant_id) SELECT pg_notify(?, ?) AS sent FROM g`, [
              ...values,
              GRANT_CHANNEL,
              JSON.stringify({ g: g.grantId }),
            ]);
          } else {
            await q.run(insert, values);
          }
        },
        effect,
      );
      cache.invalidate(g.grantId);
    },
    async getGrant(grantId, options = {}) {
      const r = await db.get<GrantRow>('SELECT * FROM grants WHERE grant_id = ?', [grantId]);
      if (!r || (r.deleted_at !== null && !options.includeDeleted)) return undefined;
      return grantFrom(r);
    },
    async listGrants(options = {}) {
      const limit = Math.min(Math.max(1, options.limit ?? 100), 1000);
      const rows = await db.all<GrantRow>(
        `SELECT * FROM grants WHERE grant_id > ? ${options.includeDeleted ? '' : 'AND deleted_at IS NULL'} ` +
          'ORDER BY grant_id LIMIT ?',
        [options.afterGrantId ?? '', limit],
      );
      return rows.map(grantFrom);
    },
    softDeleteGrant(grantId, at, effect) {
      return changeWith(
        db,
        async (q) => {
          const { changes } = await q.run(
            'UPDATE grants SET deleted_at = ? WHERE grant_id = ? AND deleted_at IS NULL',
            [at, grantId],
          );
          return changes === 1;
        },
        effect,
      );
    },
  };
}
