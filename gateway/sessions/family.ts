/**
 * A session's family (PROTOCOL.md §14): the tree of child sessions below it, and the chain of
 * ancestors above it whose state stops its payments.
 */
import { CtlError } from '../../src/index.js';
import type { SqlDatabase } from '../../service-kit/index.js';
import { descendantsOf, chainOf, type SessionRecord } from './store.js';
import type { SessionView, SessionViews } from './views.js';

/**
 * The tree below a session and the stop above it.
 * @example const { tree } = createSessionFamily({ db, now }, views); await tree(s) // { session, children }
 */
export function createSessionFamily(deps: { db: SqlDatabase; now: () => number }, views: SessionViews['views']) {
  const { db, now } = deps;

  /** A session and everything below it, each node with its spend (GET /sessions/{id}/tree). */
  async function tree(s: SessionRecord) {
    type Node = { session: SessionView; children: Node[] };
    const all = [s, ...(await descendantsOf(db, s))];
    const shown = await views(all);
    const nodes = new Map<string, Node>();
    all.forEach((d, i) => {
      const node = { session: shown[i]!, children: [] };
      nodes.set(d.id, node);
      if (d !== s) nodes.get(d.parentId!)?.children.push(node);
    });
    return nodes.get(s.id)!;
  }

  /**
   * Why a child session cannot pay because of an ancestor (revoked, expired), read now: checked
   * before anything is forwarded, so no merchant is contacted for it (PROTOCOL.md §14).
   */
  async function ancestorStop(s: SessionRecord): Promise<CtlError | undefined> {
    if (s.parentId === null) return undefined;
    const ids = chainOf(s).slice(1);
    const rows = await db.all<{ id: string; state: string; expires_at: unknown }>(
      `SELECT id, state, expires_at FROM gw_sessions WHERE id IN (${ids.map(() => '?').join(', ')})`,
      ids,
    );
    const at = now();
    for (const id of ids) {
      const r = rows.find((x) => x.id === id);
      if (!r || r.state === 'revoked')
        return new CtlError('session_revoked', `its parent session ${id} has been revoked`);
      if (r.state === 'expired' || Number(r.expires_at) <= at)
        return new CtlError('session_expired', `its parent session ${id} has expired`);
    }
    return undefined;
  }

  return { tree, ancestorStop };
}
