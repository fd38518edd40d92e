/**
 * Finding a session: the owner's (by id, or 404 as if it did not exist), the admin's (any), and
 * the agent's (by its token's hash, the large immutable parts cached).
 */
import { idleCache, notFound, type SqlDatabase } from '../../service-kit/index.js';
import { sessionById, sessionByTokenHash, type SessionRecord } from './store.js';
import { hashToken } from './tokens.js';

/**
 * The session look-ups of one service, with its token cache.
 * @example const { byToken } = createSessionLookup(db); await byToken('gw_sess_…') // SessionRecord | undefined
 */
export function createSessionLookup(db: SqlDatabase) {
  // The immutable part of each session in use, by token hash (service-kit/idle-cache.ts).
  const byTokenCache = idleCache<string, { version: string; record: SessionRecord }>();

  return {
    /** The session of an owner, or 404 as if it did not exist. */
    async owned(ownerId: string, id: string): Promise<SessionRecord> {
      const s = await sessionById(db, id);
      if (!s || s.ownerId !== ownerId) throw notFound(`no session '${id}'`);
      return s;
    },

    /** Any session, for the admin; 404 when unknown. */
    async byId(id: string): Promise<SessionRecord> {
      const s = await sessionById(db, id);
      if (!s) throw notFound(`no session '${id}'`);
      return s;
    },

    /**
     * The session of an agent's token. Every call reads the live state, expiry and ceiling; the
     * large immutable parts (config, grant, keys) come from a cache keyed by id and ceiling, the
     * only mutable input of the grant (re-minted at continuation). `spent`/`reserved` of the
     * result may be stale: money decisions are made in the store (payments/store/payments.ts).
     */
    async byToken(token: string): Promise<SessionRecord | undefined> {
      const hash = hashToken(token);
      const live = await db.get<{ id: string; state: string; expires_at: unknown; ceiling: unknown }>(
        `SELECT id, state, expires_at, ceiling FROM gw_sessions WHERE token_hash = ?`,
        [hash],
      );
      if (!live) return undefined;
      const version = `${live.id}:${live.ceiling}`;
      let hit = byTokenCache.get(hash);
      if (!hit || hit.version !== version) {
        const full = await sessionByTokenHash(db, hash);
        if (!full) return undefined;
        hit = { version, record: full };
        byTokenCache.set(hash, hit);
      }
      return {
        ...hit.record,
        state: live.state as SessionRecord['state'],
        expiresAt: Number(live.expires_at),
        ceiling: BigInt(live.ceiling as string),
      };
    },
  };
}
