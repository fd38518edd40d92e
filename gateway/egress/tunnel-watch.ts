/**
 * A tunnel lives no longer than its session (spec §3: a revoked or expired session forwards
 * nothing; PROTOCOL.md §14: nor does one below a revoked or expired ancestor). A CONNECT is
 * authenticated once, and a pass-through tunnel carries bytes the gateway cannot read, so the
 * gateway closes the connection itself when the session ends:
 *
 * - on this instance, at once: the app reports each session it revokes or expires (`ended`, from
 *   the `session.revoked` / `session.expired` events, which a revocation records for every
 *   session below the revoked one), and every tunnel whose session chain holds that id closes;
 * - at the session's `expiresAt`, by a timer (checked against the database first);
 * - whatever ended it elsewhere (another instance on the same database, a crash between a commit
 *   and its event): every `recheckMs` (default 2 s) one query reads the state and expiry of every
 *   session, and ancestor, with an open tunnel here. That interval (plus the query) bounds how
 *   long a tunnel outlives a revocation made on another instance.
 */
import type { SqlDatabase } from '../../service-kit/index.js';
import { chainOf, type SessionRecord } from '../sessions/store.js';

export const DEFAULT_SESSION_RECHECK_MS = 2000;
export type Ending = 'revoked' | 'expired';
/** How long an ended id is remembered, for a CONNECT authenticated just before the end was told. */
const REMEMBER_ENDED_MS = 60_000;
/** setTimeout's ceiling (2^31 - 1 ms, about 24.8 days); later expiries re-arm. */
const MAX_TIMER_MS = 2_147_483_647;
/** Ids per query (well under SQLite's and PostgreSQL's parameter limits). */
const QUERY_CHUNK = 500;

/** The app's side: sessions that ended here, and the read that finds those ended anywhere. */
export interface SessionEnds {
  /** A session revoked or expired on this instance (called after its commit). */
  ended(sessionId: string, how: Ending): void;
  /** Subscribes to `ended`; returns the unsubscribe. */
  onEnded(fn: (sessionId: string, how: Ending) => void): () => void;
  /** Of `ids`, those that may carry no traffic now: revoked, expired, past `expiresAt`, or gone. */
  stopped(ids: readonly string[]): Promise<Set<string>>;
}

/**
 * The app's end of the watch: `ended` from its session events, `stopped` over its database.
 * @example const ends = createSessionEnds(db, now); ends.ended('sess_…', 'revoked')
 */
export function createSessionEnds(db: SqlDatabase, now: () => number): SessionEnds {
  const listeners = new Set<(id: string, how: Ending) => void>();
  return {
    ended(id, how) {
      for (const fn of listeners) fn(id, how);
    },
    onEnded(fn) {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
    async stopped(ids) {
      const out = new Set<string>();
      const at = now();
      for (let i = 0; i < ids.length; i += QUERY_CHUNK) {
        const chunk = ids.slice(i, i + QUERY_CHUNK);
        const rows = await db.all<{ id: string; state: string; expires_at: unknown }>(
          `SELECT id, state, expires_at FROM gw_sessions WHERE id IN (${chunk.map(() => '?').join(', ')})`,
          chunk,
        );
        const live = new Set(
          rows
            .filter((r) => (r.state === 'active' || r.state === 'paused') && Number(r.expires_at) > at)
            .map((r) => r.id),
        );
        for (const id of chunk) if (!live.has(id)) out.add(id);
      }
      return out;
    },
  };
}

/** What a watched tunnel needs to be: its client connection (destroying it ends the tunnel). */
export interface Closable {
  destroy(): void;
  once(event: 'close', fn: () => void): unknown;
}

export interface TunnelWatch {
  /**
   * Watches the tunnel `socket` opened by `session`: destroyed when the session or an ancestor
   * ends. When one already ended here (told after `session` was read), says how, and watches nothing.
   */
  add(session: Pick<SessionRecord, 'id' | 'path' | 'expiresAt'>, socket: Closable): Ending | undefined;
  /** Tunnels watched now. */
  readonly size: number;
  close(): void;
}

interface Watched {
  chain: string[];
  timer?: ReturnType<typeof setTimeout>;
}

export function createTunnelWatch(o: {
  ends: SessionEnds;
  now: () => number;
  recheckMs?: number;
  onError?: (e: unknown) => void;
}): TunnelWatch {
  const recheckMs = o.recheckMs ?? DEFAULT_SESSION_RECHECK_MS;
  const watched = new Map<Closable, Watched>();
  /** Session id → the tunnels whose chain holds it. */
  const byId = new Map<string, Set<Closable>>();
  /** Ids ended here lately, when and how: a tunnel added after its session's end is refused. */
  const endedAt = new Map<string, { at: number; how: Ending }>();
  let poll: ReturnType<typeof setInterval> | undefined;
  let polling = false;

  function drop(socket: Closable) {
    const w = watched.get(socket);
    if (!w) return;
    watched.delete(socket);
    if (w.timer) clearTimeout(w.timer);
    for (const id of w.chain) {
      const set = byId.get(id);
      set?.delete(socket);
      if (set?.size === 0) byId.delete(id);
    }
    if (watched.size === 0 && poll) {
      clearInterval(poll);
      poll = undefined;
    }
  }

  function endId(id: string) {
    for (const socket of [...(byId.get(id) ?? [])]) {
      drop(socket);
      socket.destroy();
    }
  }

  function remember(id: string, how: Ending) {
    const t = o.now();
    endedAt.delete(id);
    endedAt.set(id, { at: t, how });
    for (const [k, e] of endedAt) {
      if (t - e.at <= REMEMBER_ENDED_MS) break; // insertion order: the rest are newer
      endedAt.delete(k);
    }
  }

  async function check(ids: string[]) {
    try {
      for (const id of await o.ends.stopped(ids)) endId(id);
    } catch (e) {
      o.onError?.(e); // the next round asks again
    }
  }

  async function round() {
    if (polling || byId.size === 0) return;
    polling = true;
    try {
      await check([...byId.keys()]);
    } finally {
      polling = false;
    }
  }

  /** At the session's expiry (re-armed past setTimeout's range), checked before it closes anything. */
  function armExpiry(socket: Closable, w: Watched, expiresAt: number) {
    const wait = Math.max(0, expiresAt - o.now());
    w.timer = setTimeout(
      () => {
        if (!watched.has(socket)) return;
        // Past setTimeout's range, or a timer that fired a little early: wait again.
        if (o.now() < expiresAt) return armExpiry(socket, w, expiresAt);
        void check([w.chain[0]!]);
      },
      Math.min(wait, MAX_TIMER_MS),
    );
    w.timer.unref?.();
  }

  const unsubscribe = o.ends.onEnded((id, how) => {
    remember(id, how);
    endId(id);
  });

  return {
    add(session, socket) {
      const chain = chainOf(session);
      if (chain.length === 0) chain.push(session.id);
      const ended = chain.find((id) => endedAt.has(id));
      if (ended) return endedAt.get(ended)!.how;
      const w: Watched = { chain };
      watched.set(socket, w);
      for (const id of chain) {
        let set = byId.get(id);
        if (!set) byId.set(id, (set = new Set()));
        set.add(socket);
      }
      socket.once('close', () => drop(socket));
      armExpiry(socket, w, session.expiresAt);
      if (!poll) {
        poll = setInterval(() => void round(), recheckMs);
        poll.unref?.();
      }
      return undefined;
    },
    get size() {
      return watched.size;
    },
    close() {
      unsubscribe();
      if (poll) clearInterval(poll);
      poll = undefined;
      for (const socket of [...watched.keys()]) drop(socket);
    },
  };
}
