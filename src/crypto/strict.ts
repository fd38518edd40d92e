/**
 * The strict rules of PROTOCOL.md §3, checked by us on top of whatever backend verifies, because
 * backends differ (node:crypto alone accepts some small-order Ed25519 keys, vectors/SOURCES.md):
 * - Ed25519: public key and R canonical (y < p) and not of small order, on the curve; S < L.
 * - P-256: r, s in [1, n-1] (high S accepted); public key on the curve, coordinates < p.
 * - both: signatures are exactly 64 bytes.
 * Plain BigInt, no noble: the edge build uses this file too.
 */
import type { Alg } from './types.js';

/** The field prime of Ed25519. */
export const P = 2n ** 255n - 19n;
/** The order of the Ed25519 base point (S must be below it, §3). @example le(sBytes) < L */
export const L = 2n ** 252n + 27742317777372353535851937790883648493n;
/** The Edwards d of Ed25519. */
export const D = 37095705934669439343138083508754565189542113879843219016388785533085940283555n;
// y of the 8 small-order points (identity, order 2, order 4 twice, order 8 four times): x = ±...
// for each, so comparing y alone catches every sign bit too.
const C8 = 2707385501144840649318225287225658788936804267575313519463743609750303402022n;
const SMALL_Y = [0n, 1n, P - 1n, C8, P - C8];

const Q = 0xffffffff00000001000000000000000000000000ffffffffffffffffffffffffn;
const N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
const B = 0x5ac635d8aa3a93e7b3ebbd55769886bc651d06b0cc53b0f63bce3c3e27d2604bn;

/** Big-endian bytes to BigInt. @example be(new Uint8Array([1, 0])) // 256n */
export function be(b: Uint8Array): bigint {
  let n = 0n;
  for (const x of b) n = (n << 8n) | BigInt(x);
  return n;
}

/** BigInt to `len` big-endian bytes. @example beBytes(256n, 2) // Uint8Array [1, 0] */
export function beBytes(n: bigint, len: number): Uint8Array {
  const out = new Uint8Array(len);
  for (let i = len - 1; i >= 0; i--, n >>= 8n) out[i] = Number(n & 0xffn);
  return out;
}

/** Little-endian bytes to BigInt (Ed25519 encodings). @example le(new Uint8Array([0, 1])) // 256n */
export const le = (b: Uint8Array): bigint => be(b.slice().reverse());
const mod = (a: bigint, m: bigint): bigint => ((a % m) + m) % m;

function pow(b: bigint, e: bigint, m: bigint): bigint {
  let r = 1n;
  for (b = mod(b, m); e > 0n; e >>= 1n, b = (b * b) % m) if (e & 1n) r = (r * b) % m;
  return r;
}

// The same bounds as little-endian bytes: every signature is checked against them, and comparing
// 32 bytes is much cheaper than building BigInts on the verifier's hot path.
const leBytes = (n: bigint) => beBytes(n, 32).reverse();
const P_LE = leBytes(P);
const L_LE = leBytes(L);
const SMALL_LE = SMALL_Y.map(leBytes);

/** Byte `i` of a little-endian number, with the sign bit of an Ed25519 encoding cleared when asked. */
const at = (b: Uint8Array, i: number, masked: boolean) => (masked && i === 31 ? b[i]! & 0x7f : b[i]!);

/** a < b for two 32-byte little-endian numbers. */
function lessLE(a: Uint8Array, b: Uint8Array, masked = false): boolean {
  for (let i = 31; i >= 0; i--) {
    const x = at(a, i, masked);
    if (x !== b[i]) return x < b[i]!;
  }
  return false;
}

function equalLE(a: Uint8Array, b: Uint8Array, masked: boolean): boolean {
  for (let i = 0; i < 32; i++) if (at(a, i, masked) !== b[i]) return false;
  return true;
}

/**
 * An encoded Ed25519 point that is canonical (y < p) and not one of the 8 small-order points. @example
 * ed25519ShapeOk(pub32) // true
 */
export function ed25519ShapeOk(b: Uint8Array): boolean {
  if (b.length !== 32 || !lessLE(b, P_LE, true)) return false;
  for (const small of SMALL_LE) if (equalLE(b, small, true)) return false;
  return true;
}

/**
 * An Ed25519 public key acceptable under §3: canonical, not of small order, on the curve.
 * @example ed25519KeyOk(pub32) // true
 */
export function ed25519KeyOk(b: Uint8Array): boolean {
  if (!ed25519ShapeOk(b)) return false;
  // x² = u/v with u = y² - 1, v = d y² + 1 (never 0) must be a square: u/v is one iff u·v is.
  // The Jacobi symbol tells, several times faster than Euler's exponentiation. u = 0 only at
  // y = ±1, refused above as small order.
  const y = le(b) & ((1n << 255n) - 1n);
  const y2 = (y * y) % P;
  return jacobi(mod((y2 - 1n) * (D * y2 + 1n), P), P) === 1;
}

/** The Jacobi symbol (a/n) for odd n > 0: for a prime n, 1 iff a is a non-zero square mod n. */
function jacobi(a: bigint, n: bigint): number {
  let t = 1;
  for (a %= n; a !== 0n; a %= n) {
    for (; (a & 1n) === 0n; a >>= 1n) if ((n & 7n) === 3n || (n & 7n) === 5n) t = -t;
    [a, n] = [n, a];
    if ((a & 3n) === 3n && (n & 3n) === 3n) t = -t;
  }
  return n === 1n ? t : 0;
}

/**
 * A P-256 public key (SEC1, 65 uncompressed or 33 compressed) as its affine coordinates, or
 * undefined when it is not a point of the curve (coordinates ≥ p, off the curve, the identity).
 * @example p256Point(sec1)?.x
 */
export function p256Point(b: Uint8Array): { x: bigint; y: bigint } | undefined {
  const x = be(b.subarray(1, 33));
  const rhs = mod(x * x * x - 3n * x + B, Q);
  if (x >= Q) return undefined;
  if (b.length === 65 && b[0] === 4) {
    const y = be(b.subarray(33));
    return y < Q && (y * y) % Q === rhs ? { x, y } : undefined;
  }
  if (b.length === 33 && (b[0] === 2 || b[0] === 3)) {
    let y = pow(rhs, (Q + 1n) / 4n, Q); // p ≡ 3 (mod 4)
    if ((y * y) % Q !== rhs) return undefined;
    if (Number(y & 1n) !== (b[0] & 1)) y = Q - y;
    return { x, y };
  }
  return undefined;
}

/**
 * The signature-side checks of §3, done before any backend sees the signature.
 * @example signatureShapeOk('EdDSA', sig) // false for S ≥ L or a small-order R
 */
export function signatureShapeOk(alg: Alg, sig: Uint8Array): boolean {
  if (!(sig instanceof Uint8Array) || sig.length !== 64) return false;
  if (alg === 'EdDSA') return ed25519ShapeOk(sig.subarray(0, 32)) && lessLE(sig.subarray(32), L_LE);
  const r = be(sig.subarray(0, 32));
  const s = be(sig.subarray(32));
  return r > 0n && r < N && s > 0n && s < N;
}

/**
 * ES256 signers emit low-S (§3): s > n/2 becomes n - s, the same signature mathematically.
 * @example lowS(sig) // sig, or sig with s replaced by n - s
 */
export function lowS(sig: Uint8Array): Uint8Array {
  const s = be(sig.subarray(32));
  if (s <= N >> 1n) return sig;
  const out = sig.slice();
  out.set(beBytes(N - s, 32), 32);
  return out;
}

/** A 32-byte P-256 private scalar in [1, n-1]. @example p256ScalarOk(d) // true */
export function p256ScalarOk(d: Uint8Array): boolean {
  const k = be(d);
  return d.length === 32 && k > 0n && k < N;
}
