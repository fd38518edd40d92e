/**
 * The host ABI: what the firmware supplies to the SDK running on its JS engine (README.md in this
 * folder is the contract). Every call is synchronous, because a flash write or a TRNG read on a
 * microcontroller is; the SDK's own async functions run on top and the host drains the job queue.
 *
 * Ownership: bytes passed to the host are borrowed for the duration of the call (copy what you
 * keep); bytes the host returns belong to the caller from then on (return a fresh buffer).
 * Errors: a host function that cannot do its job throws (I/O failure, flash worn out); it never
 * returns a partial or made-up result. `randomBytes` in particular never falls back to a PRNG.
 */

/** Byte-keyed storage with atomic compare-and-set, flash-backed on a device. */
export interface ByteStorage {
  /** The value under `key`, or `null` when absent. */
  get(key: Uint8Array): Uint8Array | null;
  /** Unconditional write (used only for values with a single writer, e.g. the log cursor). */
  put(key: Uint8Array, value: Uint8Array): void;
  /**
   * Atomic: writes `value` iff the current value equals `expected` byte for byte (`null`: absent),
   * and tells whether it wrote. Power loss leaves either the old or the new value, never a mix.
   */
  compareAndSet(key: Uint8Array, expected: Uint8Array | null, value: Uint8Array): boolean;
}

/**
 * A hardware monotonic counter (TPM NV counter, secure element, eMMC RPMB write counter): a value
 * that survives power loss and that no flash write, snapshot restore or reflash can lower.
 */
export interface MonotonicCounter {
  /** The current value, a safe integer ≥ 0. */
  read(): number;
  /** Adds one, durably, and returns the new value. */
  increment(): number;
}

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

export interface HostAbi {
  /** Wall clock, milliseconds since the Unix epoch (UTC). Bundles and SBAs expire against it. */
  now(): number;
  /** `n` bytes from the device's CSPRNG/TRNG. */
  randomBytes(n: number): Uint8Array;
  storage: ByteStorage;
  /** One line for the device log; must not throw (drop it instead). */
  log(level: LogLevel, message: string): void;
  /** Optional: when present, the spend ledgers bind their writes to it (README.md § The offline exposure bound). */
  monotonicCounter?: MonotonicCounter;
}

/** Refuses an ABI object that lacks a function, before anything relies on it. */
export function checkHostAbi(abi: unknown): asserts abi is HostAbi {
  const a = abi as Record<string, any>;
  const missing = [
    typeof a?.['now'] === 'function' ? '' : 'now',
    typeof a?.['randomBytes'] === 'function' ? '' : 'randomBytes',
    typeof a?.['log'] === 'function' ? '' : 'log',
    typeof a?.['storage']?.get === 'function' ? '' : 'storage.get',
    typeof a?.['storage']?.put === 'function' ? '' : 'storage.put',
    typeof a?.['storage']?.compareAndSet === 'function' ? '' : 'storage.compareAndSet',
    a?.['monotonicCounter'] === undefined ||
    (typeof a['monotonicCounter']?.read === 'function' && typeof a['monotonicCounter']?.increment === 'function')
      ? ''
      : 'monotonicCounter.read/increment',
  ].filter(Boolean);
  if (missing.length) throw new TypeError(`host ABI: missing ${missing.join(', ')}`);
}

/** Byte equality, for CAS implementations. */
export function bytesEqual(a: Uint8Array | null, b: Uint8Array | null): boolean {
  if (a === null || b === null) return a === b;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * An in-memory ByteStorage (tests, and the reference for the semantics). Keys are compared by
 * bytes; values are copied in and out, as the ownership rule says.
 * @example const s = createMemoryByteStorage(); s.compareAndSet(k, null, v) // true
 */
export function createMemoryByteStorage(): ByteStorage & { entries(): Array<[Uint8Array, Uint8Array]> } {
  const map = new Map<string, [Uint8Array, Uint8Array]>();
  const id = (k: Uint8Array) => {
    if (!(k instanceof Uint8Array) || k.length === 0) throw new TypeError('storage key must be a non-empty Uint8Array');
    let s = '';
    for (let i = 0; i < k.length; i++) s += k[i]!.toString(16).padStart(2, '0');
    return s;
  };
  return {
    get(key) {
      const e = map.get(id(key));
      return e ? e[1].slice() : null;
    },
    put(key, value) {
      map.set(id(key), [key.slice(), value.slice()]);
    },
    compareAndSet(key, expected, value) {
      const k = id(key);
      const cur = map.get(k)?.[1] ?? null;
      if (!bytesEqual(cur, expected)) return false;
      map.set(k, [key.slice(), value.slice()]);
      return true;
    },
    entries() {
      return [...map.values()].map(([k, v]) => [k.slice(), v.slice()] as [Uint8Array, Uint8Array]);
    },
  };
}
