/**
 * A cache of what a service computes once per session (a prepared signer, a derived key, a
 * parsed record), sized by the sessions in use rather than by every session ever seen: entries
 * unused for `idleMs` are dropped, and past `max` the least recently used goes first (lru-cache).
 * Dropped entries are computed again on demand. Stale entries are swept when a new one is added,
 * at most once per `idleMs`, so no timer is left behind when the service closes.
 */
import { LRUCache } from 'lru-cache';

export interface IdleCache<K, V> {
  get(key: K): V | undefined;
  set(key: K, value: V): void;
  delete(key: K): void;
  readonly size: number;
}

/** @example const signers = idleCache<string, Promise<Signer>>(); signers.get(id) ?? signers.set(id, prepare(id)) */
export function idleCache<K extends {}, V extends {}>(
  o: { idleMs?: number; max?: number; now?: () => number } = {},
): IdleCache<K, V> {
  const idleMs = o.idleMs ?? 60_000;
  const now = o.now ?? (() => performance.now());
  const cache = new LRUCache<K, V>({
    max: o.max ?? 10_000,
    ttl: idleMs,
    updateAgeOnGet: true,
    ttlResolution: 0,
    perf: { now },
  });
  let sweptAt = now();
  return {
    get: (key) => cache.get(key),
    set(key, value) {
      if (now() - sweptAt >= idleMs) {
        sweptAt = now();
        cache.purgeStale();
      }
      cache.set(key, value);
    },
    delete: (key) => void cache.delete(key),
    get size() {
      return cache.size;
    },
  };
}
