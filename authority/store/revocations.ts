/**
 * Grant revocation: the revocation cache kept in step with every process's writes (PostgreSQL
 * LISTEN/NOTIFY), revoking a grant, the status read on every wallet's and merchant's path, and
 * the revoked ids a Trust Bundle lists. Mixed into the AuthorityStore by sql-store.ts; grants.ts
 * shares the cache and the channel (a grant insert invalidates too).
 */
import { randomUUID } from 'node:crypto';
import type { SqlDatabase, SqlExecutor } from '../../service-kit/index.js';
import { createRevocationCache, type CachedStatus, type RevocationCache } from './revocation-cache.js';
import { REVOKED_DELEGATIONS_SQL } from './delegations.js';
import type { AuthorityStore } from './types.js';

/**
 * PostgreSQL channel of grant changes (revocation, insert), payload `{"g": grantId, "t": token}`.
 * Notifications are database-wide: another schema's authority on the same database only causes
 * harmless extra invalidations.
 */
export const GRANT_CHANNEL = 'ctl_authority_grants';
/** Longest wait for a revocation's own notification to come back before answering (then the cache is cleared). */
const ECHO_TIMEOUT_MS = 2000;

/**
 * How long a revoked grant stays in bundles after it expires: a verifier may run with a clock
 * tolerance (PROTOCOL.md §1 `clockToleranceMs`) or a slow clock, and would accept an expired grant
 * inside it; a day covers any sane tolerance while keeping bundles from growing without bound.
 */
export const REVOKED_AFTER_EXPIRY_MS = 86_400_000;

export type RevocationStore = Pick<AuthorityStore, 'revokeGrant' | 'revocationStatus' | 'listRevokedGrantIds'>;

/** The process's revocation cache and, on PostgreSQL, the subscription that keeps it in step. */
export interface GrantChanges {
  cache: RevocationCache;
  subscription: { close(): Promise<void> } | undefined;
}

/**
 * Keeps `cache` in step with every process's writes through LISTEN. Returns the subscription,
 * or undefined when the database cannot listen (the cache then never holds a negative answer).
 */
function followGrantChanges(db: SqlDatabase, cache: RevocationCache) {
  return db.listen?.(GRANT_CHANNEL, {
    notify(payload) {
      let n: { g?: unknown; t?: unknown };
      try {
        n = JSON.parse(payload) as typeof n;
      } catch {
        n = {};
      }
      if (typeof n.g !== 'string') return cache.setLive(cache.live); // unreadable: drop everything
      cache.invalidate(n.g);
      if (typeof n.t === 'string') cache.echo(n.t);
    },
    state: (live) => cache.setLive(live),
  });
}

/** @example const changes = createGrantChanges(db, 10_000) (0 turns the cache off) */
export function createGrantChanges(db: SqlDatabase, maxEntries: number): GrantChanges {
  const postgres = db.dialect === 'postgres';
  // SQLite: one process per database file, so the store's own writes are every write (live from
  // the start). PostgreSQL: live only while the LISTEN connection is (until then, reads go through).
  const cache = createRevocationCache({ maxEntries, live: !postgres });
  const subscription = postgres ? followGrantChanges(db, cache) : undefined;
  return { cache, subscription };
}

export async function revokedGrantIds(q: SqlExecutor, nowMs: number): Promise<string[]> {
  const rows = await q.all<{ grant_id: string }>(
    // Revoked delegations beside revoked grants (PROTOCOL.md §14), each until a day past its expiry.
    `SELECT grant_id FROM grants WHERE revoked_at IS NOT NULL AND expires_at_ms > ?
     UNION ${REVOKED_DELEGATIONS_SQL} ORDER BY grant_id`,
    [nowMs - REVOKED_AFTER_EXPIRY_MS, nowMs - REVOKED_AFTER_EXPIRY_MS],
  );
  return rows.map((r) => r.grant_id);
}

export function createRevocationStore(db: SqlDatabase, cache: RevocationCache): RevocationStore {
  const postgres = db.dialect === 'postgres';
  /** NOTIFY statement, sent inside the writing transaction: delivered at its commit, never without it. */
  const notify = (q: SqlExecutor, grantId: string, token: string) =>
    q.get('SELECT pg_notify(?, ?) AS sent', [GRANT_CHANNEL, JSON.stringify({ g: grantId, t: token })]);
  const loadStatus = async (grantId: string): Promise<CachedStatus> => {
    const r = await db.get<{ revoked_at: string | null }>('SELECT revoked_at FROM grants WHERE grant_id = ?', [
      grantId,
    ]);
    if (!r) return null;
    return r.revoked_at === null ? { revoked: false } : { revoked: true, revokedAt: r.revoked_at };
  };

  return {
    async revokeGrant(grantId, by, effect) {
      // Registered before the commit, so the echo cannot be missed.
      const token = randomUUID();
      const echo = cache.expectEcho(token);
      let result: { revokedAt: string; changed: boolean } | undefined;
      let after = undefined as (() => void) | undefined;
      try {
        result = await db.tx(async (q) => {
          // One conditional UPDATE: the first revocation wins and later ones change nothing.
          const { changes } = await q.run(
            'UPDATE grants SET revoked_at = ?, revoked_by = ?, revoke_reason = ? WHERE grant_id ' +
              '= ? AND revoked_at IS NULL',
            [by.at, by.actor, by.reason ?? null, grantId],
          );
          const r = await q.get<{ revoked_at: string | null }>('SELECT revoked_at FROM grants WHERE grant_id = ?', [
            grantId,
          ]);
          if (!r || r.revoked_at === null) return undefined;
          // Also when unchanged: this caller is told "revoked", so every process must know it.
          if (postgres) await notify(q, grantId, token);
          const out = { revokedAt: r.revoked_at, changed: changes === 1 };
          after = (effect && (await effect(q, out))) || undefined;
          return out;
        });
      } catch (e) {
        echo.cancel();
        throw e;
      }
      cache.invalidate(grantId);
      if (after) after();
      // Answer only once the notification has come back through this process's listener: every
      // store of this process has dropped the entry by then, and PostgreSQL has signalled every
      // other listener (they are a socket read away from dropping it).
      if (result && postgres) await echo.wait(ECHO_TIMEOUT_MS);
      else echo.cancel();
      return result;
    },
    async revocationStatus(grantId) {
      // The hot path: a cache hit answers without touching the database (revocation-cache.ts).
      const hit = cache.get(grantId);
      if (hit !== undefined) return hit ?? undefined;
      return (await cache.read(grantId, () => loadStatus(grantId))) ?? undefined;
    },
    listRevokedGrantIds: (nowMs) => revokedGrantIds(db, nowMs),
  };
}
