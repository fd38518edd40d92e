/**
 * In-process cache of grant revocation status, so `GET /revoke` (on every wallet's and merchant's
 * path) is answered without a database round trip, without weakening revocation:
 *
 * - "revoked" is final (a revocation is never undone), so a "revoked" answer is kept for good.
 * - "not revoked" and "unknown grant" are kept only while the cache is *live*, and only until the
 *   next invalidation of that grant. Live means: on PostgreSQL, this process's LISTEN connection
 *   is up (every revocation and grant insert NOTIFYs in its own transaction, and every process
 *   drops the entry when the notification arrives); on SQLite, always (one process per database
 *   file; the store's own writes invalidate).
 * - A read that began before an invalidation may have seen the row before the change, so it must
 *   not fill the cache after it: every invalidation and every change of liveness bumps
 *   `generation`, and a fill is kept only if the generation did not move during the read.
 * - Losing the listener (or a notification that cannot be read) clears everything: what was
 *   missed is unknown.
 */
import type { RevocationStatus } from './types.js';

/** `null`: no such grant. */
export type CachedStatus = Readonly<RevocationStatus> | null;

export interface RevocationCache {
  /** Cached answer, or `undefined` on a miss. */
  get(grantId: string): CachedStatus | undefined;
  /** Reads through `load` on a miss and keeps the answer when the rules above allow. */
  read(grantId: string, load: () => Promise<CachedStatus>): Promise<CachedStatus>;
  /** This grant changed (revoked, or inserted): drop its entry; in-flight reads may not fill. */
  invalidate(grantId: string): void;
  /** Listener up (`true`) or lost (`false`); either way everything is dropped. */
  setLive(live: boolean): void;
  readonly live: boolean;
  /**
   * Registered before a notifying transaction commits: `wait` resolves once that notification
   * (found by `token`) came back to this process, so every cache of this process has dropped the
   * entry before the write is answered. It resolves at once when the cache is not live (nothing
   * negative is cached then). After `timeoutMs` without it, the cache is cleared, as if the
   * listener had been lost.
   */
  expectEcho(token: string): { wait(timeoutMs: number): Promise<void>; cancel(): void };
  /** A notification carrying `token` arrived. */
  echo(token: string): void;
  readonly size: number;
}

/** @example const cache = createRevocationCache({ maxEntries: 10_000, live: true }) */
export function createRevocationCache(options: { maxEntries: number; live: boolean }): RevocationCache {
  const entries = new Map<string, CachedStatus>();
  const echoes = new Map<string, () => void>();
  let generation = 0;
  let live = options.live;
  const max = Math.max(0, options.maxEntries);

  const put = (grantId: string, status: CachedStatus) => {
    if (max === 0) return;
    entries.delete(grantId);
    // Bounded: the oldest insertion goes first (Map keeps insertion order). A hot grant evicted
    // this way costs one database read to come back.
    if (entries.size >= max) entries.delete(entries.keys().next().value as string);
    entries.set(grantId, status === null ? null : Object.freeze({ ...status }));
  };

  const clear = () => {
    generation++;
    entries.clear();
  };

  const cache: RevocationCache = {
    get: (grantId) => entries.get(grantId),
    async read(grantId, load) {
      const hit = entries.get(grantId);
      if (hit !== undefined) return hit;
      const before = generation;
      const status = await load();
      if (status?.revoked || (live && generation === before)) put(grantId, status);
      return status;
    },
    invalidate(grantId) {
      generation++;
      // A cached "revoked" is still true; anything else may not be.
      if (entries.get(grantId)?.revoked !== true) entries.delete(grantId);
    },
    setLive(next) {
      live = next;
      clear();
      // Down: nothing negative is cached any more, so nobody needs to wait for an echo.
      if (!next) for (const done of echoes.values()) done();
    },
    get live() {
      return live;
    },
    expectEcho(token) {
      let arrived!: () => void;
      const came = new Promise<void>((r) => (arrived = r));
      echoes.set(token, arrived);
      return {
        async wait(timeoutMs) {
          if (!live) {
            echoes.delete(token);
            return;
          }
          let timer: NodeJS.Timeout | undefined;
          const timedOut = await Promise.race([
            came.then(() => false),
            new Promise<boolean>((r) => (timer = setTimeout(() => r(true), timeoutMs))),
          ]);
          clearTimeout(timer);
          echoes.delete(token);
          if (timedOut) clear();
        },
        cancel: () => void echoes.delete(token),
      };
    },
    echo(token) {
      echoes.get(token)?.();
    },
    get size() {
      return entries.size;
    },
  };
  return cache;
}
