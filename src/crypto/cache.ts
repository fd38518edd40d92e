/**
 * Bounded maps, so a verifier checking many SBAs under one key imports that key once while
 * hostile input cannot grow memory without bound.
 */

/**
 * Sets `key` in an insertion-order map of at most `max` entries, dropping the oldest. @example remember(cache, url,
 * entry, 64)
 */
export function remember<K, V>(map: Map<K, V>, key: K, value: V, max = 1024): V {
  if (map.size >= max) map.delete(map.keys().next().value as K);
  map.set(key, value);
  return value;
}

/**
 * An LRU cache of at most `max` entries. @example const c = createLru<string, number>(2); c.set('a', 1); c.get('a') //
 * 1
 */
export function createLru<K, V>(max = 256) {
  const map = new Map<K, V>();
  return {
    get(key: K): V | undefined {
      const v = map.get(key);
      if (v !== undefined) {
        map.delete(key); // re-insert: Map keeps insertion order, so the oldest is first
        map.set(key, v);
      }
      return v;
    },
    set(key: K, value: V): void {
      map.delete(key);
      remember(map, key, value, max);
    },
    get size(): number {
      return map.size;
    },
    clear(): void {
      map.clear();
    },
  };
}
