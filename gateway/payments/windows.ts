/**
 * Which counters a payment of a session moves (PROTOCOL.md §13, §14): its own lifetime total
 * alone, or, for a session with windows or a parent, the chain of it and its ancestors with the
 * window rows it counts in at that moment (store/counters.ts), and the velocity limits.
 */
import { idleCache, type SqlDatabase } from '../../service-kit/index.js';
import { chainOf, type SessionRecord, type SessionWindow } from '../sessions/store.js';
import { chainWindowKeys, windowsOfChain } from './store/counters.js';

/**
 * The chain a payment of `session` reserves on (PROTOCOL.md §13, §14): itself and its ancestors,
 * when it counts on more than its own lifetime total; undefined for the single-counter path.
 */
export function counterChain(session: SessionRecord): string[] | undefined {
  return session.parentId !== null || session.config.windows?.length ? chainOf(session) : undefined;
}

export function createChainWindows(db: SqlDatabase) {
  // The windows of each chain in use (they never change; only a window row's limit may).
  const chainWindowsOf = idleCache<string, { id: string; windows: SessionWindow[]; windowsStart: number | null }[]>();

  /** The window rows a payment of `session`'s chain at `at` counts in (counters.ts). */
  async function keys(session: SessionRecord, chain: string[], at: number) {
    let sessions = chainWindowsOf.get(session.id);
    if (!sessions) {
      sessions = await windowsOfChain(db, chain);
      chainWindowsOf.set(session.id, sessions);
    }
    return chainWindowKeys(sessions, at);
  }

  return {
    /** Whether a payment of `session` counts in a window, its own or an ancestor's. */
    async windowed(session: SessionRecord, at: number): Promise<boolean> {
      const chain = counterChain(session);
      return chain !== undefined && (await keys(session, chain, at)).length > 0;
    },

    /** The counters a reservation of `session` at `at` names (store/payments.ts ReserveInput). */
    async counters(session: SessionRecord, at: number) {
      const chain = counterChain(session);
      const velocity = session.maxPerHour !== null || session.maxPerMerchantDay !== null;
      return { velocity, chain, ...(chain && !velocity ? { chainWindows: await keys(session, chain, at) } : {}) };
    },
  };
}

export type ChainWindows = ReturnType<typeof createChainWindows>;
