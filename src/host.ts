/**
 * The only place in src/ that looks at the host (ARCHITECTURE.md rule 2): everything here is a
 * guarded feature test, so the SDK runs unchanged on Node, Deno, Bun, browsers and QuickJS.
 * Nothing else in src/ may touch `globalThis` host objects.
 */
type Env = Record<string, string | undefined>;
const g = globalThis as Record<string, any>;

/** `node:crypto` where the host has a synchronous one (Node ≥ 20.16, Bun, Deno), else undefined. */
export function hostNodeCrypto(): any | undefined {
  try {
    const proc = g['process'];
    const get = proc && typeof proc.getBuiltinModule === 'function' ? proc.getBuiltinModule : undefined;
    return get ? get.call(proc, 'node:crypto') : undefined;
  } catch {
    return undefined;
  }
}

/** WebCrypto's SubtleCrypto where the host has it. */
export function hostSubtle(): SubtleCrypto | undefined {
  const c = g['crypto'];
  return c && c.subtle ? (c.subtle as SubtleCrypto) : undefined;
}

/** `crypto.getRandomValues` where the host has it (QuickJS does not: the firmware supplies randomness). */
export function hostGetRandomValues(): ((a: Uint8Array) => Uint8Array) | undefined {
  const c = g['crypto'];
  return c && typeof c.getRandomValues === 'function' ? (a) => c.getRandomValues(a) : undefined;
}

/** An environment variable, where the host has an environment (spec §4.3, §4.4 key fallback). */
export function hostEnv(name: string): string | undefined {
  try {
    const env: Env | undefined = g['process']?.env ?? (g['Deno']?.env?.toObject?.() as Env | undefined);
    const v = env?.[name];
    return typeof v === 'string' && v.length > 0 ? v : undefined;
  } catch {
    return undefined; // Deno without --allow-env throws: no environment then
  }
}

/** The host's fetch, bound, where it has one. */
export function hostFetch(): typeof fetch | undefined {
  return typeof g['fetch'] === 'function' ? (g['fetch'] as typeof fetch).bind(globalThis) : undefined;
}

/** A promise-returning sleep over the host's `setTimeout`, where it has one. */
export function hostSleep(): ((ms: number) => Promise<void>) | undefined {
  const st = g['setTimeout'];
  return typeof st === 'function' ? (ms) => new Promise<void>((resolve) => st(resolve, ms)) : undefined;
}

/** The host's wall clock in ms, the default `now` of every option bag. */
export function hostNow(): number {
  return Date.now();
}

/** The host's TextEncoder.encode, where it has one (QuickJS does not: src/encoding/utf8.ts falls back). */
export function hostTextEncode(): ((s: string) => Uint8Array) | undefined {
  const TE = g['TextEncoder'];
  if (typeof TE !== 'function') return undefined;
  const enc = new TE();
  return (s) => enc.encode(s);
}

/**
 * Duck-typed: the global CryptoKey class is a host object (ARCHITECTURE.md rule 2). @example
 * isCryptoKey(pair.privateKey) // true
 */
export function isCryptoKey(v: unknown): v is CryptoKey {
  const k = v as CryptoKey;
  return (
    !!k &&
    typeof k === 'object' &&
    typeof k.type === 'string' &&
    typeof k.extractable === 'boolean' &&
    !!k.algorithm &&
    Array.isArray(k.usages)
  );
}
