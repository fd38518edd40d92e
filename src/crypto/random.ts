/**
 * Randomness: the host's CSPRNG (`crypto.getRandomValues`), or, where there is none (QuickJS on
 * the firmware), the source the firmware host installs with `setRandomSource` (ARCHITECTURE.md,
 * firmware-bridge). Never a fallback to Math.random: no source is an error.
 */
import { hostGetRandomValues } from '../host.js';

let source: ((n: number) => Uint8Array) | undefined;

/**
 * Installs (or, with `undefined`, removes) the randomness source used when set; it wins over the host's.
 * @example setRandomSource((n) => firmware.random(n))
 */
export function setRandomSource(fn: ((n: number) => Uint8Array) | undefined): void {
  if (fn !== undefined && typeof fn !== 'function') throw new TypeError('setRandomSource(fn): fn must be a function');
  source = fn;
}

/** `n` bytes from a CSPRNG; throws if the host has none and none was set. @example randomBytes(16).length // 16 */
export function randomBytes(n: number): Uint8Array {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError('randomBytes(n): n must be a non-negative integer');
  if (source) {
    const out = source(n);
    if (!(out instanceof Uint8Array) || out.length !== n)
      throw new Error('randomBytes: the random source returned the wrong number of bytes');
    return out;
  }
  const get = hostGetRandomValues();
  if (!get) throw new Error('randomBytes: no crypto.getRandomValues on this host; call setRandomSource(fn)');
  if (n <= 64) return fromPool(get, n);
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i += 65536) get(out.subarray(i, Math.min(n, i + 65536))); // getRandomValues caps at 64 KiB
  return out;
}

// Small draws (ids, nonces: 16–32 bytes, one per SBA) come from a pool filled 4 KiB at a time:
// one getRandomValues call per draw cost the wallet about a tenth of its signing time. Every
// byte is handed out once and wiped from the pool as it goes.
const POOL_BYTES = 4096;
let pool: Uint8Array | undefined;
let used = POOL_BYTES;

function fromPool(get: (a: Uint8Array) => Uint8Array, n: number): Uint8Array {
  if (!pool || used + n > POOL_BYTES) {
    pool ??= new Uint8Array(POOL_BYTES);
    get(pool);
    used = 0;
  }
  const out = pool.slice(used, used + n);
  pool.fill(0, used, used + n);
  used += n;
  return out;
}
