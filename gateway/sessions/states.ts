/**
 * The state a session's payments meet (PROTOCOL.md §14): every payment of a child session checks
 * every ancestor, so a child of a paused, revoked or expired session is paused, revoked or expired
 * with it, whatever its own row says. The views say so (`state`, `stateFrom`), so what the owner
 * and the agent read is what a payment meets.
 */
import type { SqlExecutor } from '../../service-kit/index.js';
import { chainOf, effectiveState, type SessionRecord, type SessionState } from './store.js';

/** The ancestor whose state a child session's payments meet, and that state. */
export interface Held {
  state: SessionState;
  from: string;
}

/** Which of two states stops more: a payment meets the strongest state of its chain. */
const STATE_RANK: Record<SessionState, number> = { active: 0, paused: 1, expired: 2, revoked: 3 };

/**
 * For each child session of `list` whose chain holds a stronger state than its own, the nearest
 * ancestor with the strongest one; the ancestors not in `list` are read in one query (500 ids a
 * statement). A session absent from the result reads its own state.
 * @example const held = await heldBy(db, page, Date.now()); held.get(child.id) // { state: 'paused', from: parentId }
 */
export async function heldBy(q: SqlExecutor, list: SessionRecord[], at: number): Promise<Map<string, Held>> {
  const out = new Map<string, Held>();
  const children = list.filter((x) => x.parentId !== null);
  if (children.length === 0) return out;
  const states = new Map(list.map((x) => [x.id, effectiveState(x, at)]));
  const missing = [...new Set(children.flatMap((x) => chainOf(x).slice(1)))].filter((id) => !states.has(id));
  for (let i = 0; i < missing.length; i += 500) {
    const ids = missing.slice(i, i + 500);
    const rows = await q.all<{ id: string; state: string; expires_at: unknown; paused_window: string | null }>(
      `SELECT id, state, expires_at, paused_window FROM gw_sessions WHERE id IN (${ids.map(() => '?').join(', ')})`,
      ids,
    );
    for (const r of rows) {
      const own = {
        state: r.state as SessionState,
        expiresAt: Number(r.expires_at),
        pausedWindow: r.paused_window ? JSON.parse(r.paused_window) : null,
      };
      states.set(r.id, effectiveState(own, at));
    }
  }
  for (const x of children) {
    let held: Held | undefined;
    let rank = STATE_RANK[states.get(x.id)!];
    for (const id of chainOf(x).slice(1)) {
      // An ancestor gone from the database stops its descendants, as payments/store/counters.ts refuses.
      const st = states.get(id) ?? 'revoked';
      if (STATE_RANK[st] > rank) [held, rank] = [{ state: st, from: id }, STATE_RANK[st]];
    }
    if (held) out.set(x.id, held);
  }
  return out;
}
