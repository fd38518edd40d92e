/**
 * Revocation (spec §3 DELETE row): one conditional UPDATE in the store, and the session.revoked
 * event recorded in its transaction, for the owner's stop, the admin's, and an owner disabled.
 */
import { formatTimestamp } from '../../src/index.js';
import type { SqlDatabase } from '../../service-kit/index.js';
import { sessionById, revokeSession, type SessionRecord, type RevokedBy } from './store.js';
import type { GatewayEvents } from './events.js';
import type { SessionViews } from './views.js';

/**
 * The stop of a session, and the effect recording the sessions a change revoked.
 * @example const { revoke } = createRevocation({ db, events, now }, views); await revoke(s, 'owner')
 */
export function createRevocation(
  deps: { db: SqlDatabase; events: GatewayEvents; now: () => number },
  views: SessionViews['views'],
) {
  const { db, now } = deps;

  /** Records the revocation of the sessions a change revoked, in its transaction. */
  const revokedEvents = (at: number, by: RevokedBy, reason?: string) =>
    deps.events.effect((revoked: SessionRecord[] | undefined) =>
      (revoked ?? []).map((s) => ({
        session: s,
        type: 'session.revoked' as const,
        data: { revokedAt: formatTimestamp(at), revokedBy: by, ...(reason ? { reason } : {}) },
        actor: by,
      })),
    );

  /**
   * spec §3 DELETE row: revoked at once; repeated calls answer the same. The owner's and the
   * admin's stop are recorded alike: `revoked_by` on the session and the session.revoked event.
   */
  async function revoke(s: SessionRecord, by: RevokedBy) {
    const at = now();
    await revokeSession(db, s.id, at, by, revokedEvents(at, by));
    return (await views([(await sessionById(db, s.id))!]))[0]!;
  }

  return { revoke, revokedEvents };
}
