/**
 * The Reflect metadata API `@peculiar/x509` needs (its dependency tsyringe refuses to load
 * without one: the library's README "Reflect Polyfill Required"). Installed only when no other
 * polyfill is: the subset tsyringe and TypeScript's emitted decorators call, kept per target.
 * Installed before `@peculiar/x509` is loaded (ca.ts loads it lazily: a bundle evaluates its
 * external imports before its own code, so a static import would come first).
 */
type Key = unknown;
const store = new WeakMap<object, Map<string | symbol | undefined, Map<Key, unknown>>>();

function own(target: object, prop: string | symbol | undefined, create: boolean) {
  let byProp = store.get(target);
  if (!byProp) {
    if (!create) return undefined;
    store.set(target, (byProp = new Map()));
  }
  let m = byProp.get(prop);
  if (!m && create) byProp.set(prop, (m = new Map()));
  return m;
}

function lookup(target: object | null, key: Key, prop?: string | symbol): unknown {
  for (let t = target; t; t = Object.getPrototypeOf(t)) {
    const m = own(t, prop, false);
    if (m?.has(key)) return m.get(key);
  }
  return undefined;
}

const api = {
  defineMetadata: (key: Key, value: unknown, target: object, prop?: string | symbol) =>
    void own(target, prop, true)!.set(key, value),
  getOwnMetadata: (key: Key, target: object, prop?: string | symbol) => own(target, prop, false)?.get(key),
  getMetadata: (key: Key, target: object, prop?: string | symbol) => lookup(target, key, prop),
  hasOwnMetadata: (key: Key, target: object, prop?: string | symbol) => Boolean(own(target, prop, false)?.has(key)),
  hasMetadata: (key: Key, target: object, prop?: string | symbol) => lookup(target, key, prop) !== undefined,
  metadata: (key: Key, value: unknown) => (target: object, prop?: string | symbol) =>
    void own(target, prop, true)!.set(key, value),
};

/** Puts the API on `Reflect` unless a polyfill already did. */
export function installReflectMetadata(): void {
  const R = Reflect as unknown as Record<string, unknown>;
  if (typeof R.getMetadata !== 'function') for (const [k, v] of Object.entries(api)) R[k] = v;
}
