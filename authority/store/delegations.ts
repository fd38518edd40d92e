/**
 * Revoked delegations (PROTOCOL.md §14). The authority never sees a delegation until someone
 * revokes it: a delegator signs it peer to peer. So only revocations are kept, one row per
 * delegation id with its root grant and its expiry (bundles list it until a day after, as for
 * grants). Plain SQL shared by SQLite and PostgreSQL, mixed into the AuthorityStore by sql-store.ts;
 * each write is one statement, and the first revocation wins.
 */
import type { SqlDatabase } from '../../service-kit/index.js';

export interface DelegationRevocation {
  revocationId: string;
  delegationId: string;
  rootGrantId: string;
  revokedAt: string;
}

export interface DelegationStore {
  /** Records a revocation; idempotent (the first `revokedAt` stays, `changed` only for the call that made it). */
  revokeDelegation(r: {
    revocationId: string;
    delegationId: string;
    rootGrantId: string;
    expiresAtMs: number;
    at: string;
    actor: string;
    reason?: string;
  }): Promise<{ revokedAt: string; changed: boolean }>;
  /** The revocation recorded for this revocation id (`linkRevocationId`), if any. */
  delegationRevocation(revocationId: string): Promise<DelegationRevocation | undefined>;
}

// Every AuthorityStore is also a DelegationStore (sql-store.ts mixes createDelegationStore in).
declare module './types.js' {
  interface AuthorityStore extends DelegationStore {}
}

export const DELEGATION_MIGRATION = {
  id: 'authority-delegations-001',
  sql: `
    CREATE TABLE delegation_revocations (
      delegation_id TEXT PRIMARY KEY,
      root_grant_id TEXT NOT NULL,
      expires_at_ms BIGINT NOT NULL,
      revoked_at TEXT NOT NULL,
      revoked_by TEXT NOT NULL,
      revoke_reason TEXT
    );
    CREATE INDEX delegation_revocations_expiry ON delegation_revocations (expires_at_ms);
  `,
};

/**
 * Revocations keyed by the link's revocation id (PROTOCOL.md §14): keyed by delegation id, a
 * hostile delegator in any tree could revoke another tree's link, or a grant, by copying its id.
 * Rows of the first table name no link, so they cannot be carried over.
 */
export const DELEGATION_BY_HASH_MIGRATION = {
  id: 'authority-delegations-002',
  sql: `
    DROP TABLE delegation_revocations;
    CREATE TABLE delegation_revocations (
      revocation_id TEXT PRIMARY KEY,
      delegation_id TEXT NOT NULL,
      root_grant_id TEXT NOT NULL,
      expires_at_ms BIGINT NOT NULL,
      revoked_at TEXT NOT NULL,
      revoked_by TEXT NOT NULL,
      revoke_reason TEXT
    );
    CREATE INDEX delegation_revocations_expiry ON delegation_revocations (expires_at_ms);
  `,
};

/** The revoked links' revocation ids a Trust Bundle lists beside grant ids (PROTOCOL.md §14). */
export const REVOKED_DELEGATIONS_SQL =
  'SELECT revocation_id AS grant_id FROM delegation_revocations WHERE expires_at_ms > ?';

export function createDelegationStore(db: SqlDatabase): DelegationStore {
  const read = async (id: string) => {
    const r = await db.get<{ delegation_id: string; root_grant_id: string; revoked_at: string }>(
      'SELECT delegation_id, root_grant_id, revoked_at FROM delegation_revocations WHERE revocation_id = ?',
      [id],
    );
    return (
      r && { revocationId: id, delegationId: r.delegation_id, rootGrantId: r.root_grant_id, revokedAt: r.revoked_at }
    );
  };
  return {
    async revokeDelegation(r) {
      const { changes } = await db.run(
        `INSERT INTO delegation_revocations
           (revocation_id, delegation_id, root_grant_id, expires_at_ms, revoked_at, revoked_by, revoke_reason)
         VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (revocation_id) DO NOTHING`,
        [r.revocationId, r.delegationId, r.rootGrantId, r.expiresAtMs, r.at, r.actor, r.reason ?? null],
      );
      const row = (await read(r.revocationId))!;
      return { revokedAt: row.revokedAt, changed: changes === 1 };
    },
    delegationRevocation: read,
  };
}
