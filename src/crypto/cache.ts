/**
 * A small bounded LRU map, so a verifier checking many SBAs under one key imports that key once
 * while hostile input cannot grow memory without bound.
 */

/** An LRU cache of at most `max` entries. @example const c = createLru<string, number>(2); c.set('a', 1); c.get('a') // 1 */
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
      map.set(key, value);
      if (map.size > max) map.delete(map.keys().next().value as K);
    },
    get size(): number {
      return map.size;
    },
    clear(): void {
      map.clear();
    },
  };
}
