/**
 * Ed25519 verification in plain BigInt, no noble (RFC 8032 §5.1): the point arithmetic a verifier
 * needs and nothing else, so a build that only verifies carries no signing stack. Variable time,
 * which is right here only because every input of a verification is public; signing (a secret
 * scalar) stays with noble (noble-backend.ts).
 *
 * Cofactorless, as OpenSSL and libsodium: [S]B − [k]A must encode to R exactly (noble's own verify
 * is cofactored even with `zip215: false` and would accept signatures under mixed-order keys,
 * speccheck cases 4 and 5, that the native backend refuses). The caller has applied the §3 shape
 * rules (S < L, R and A canonical, A not of small order, A on the curve: strict.ts).
 */
import { sha512 } from './sha2.js';
import { concat } from './der.js';
import { D, L, P, le } from './strict.js';
import { naf5 } from './naf.js';

/** Extended twisted Edwards coordinates: x = X/Z, y = Y/Z, x·y = T/Z. */
type Point = readonly [bigint, bigint, bigint, bigint];

const m = (a: bigint): bigint => {
  const r = a % P;
  return r < 0n ? r + P : r;
};
const D2 = m(2n * D);
const ZERO: Point = [0n, 1n, 1n, 0n];
const BX = 0x216936d3cd6e53fec0a4e231fdd6dc5c692cc7609525a7b2c9562d608f25d51an;
const BY = 0x6666666666666666666666666666666666666666666666666666666666666658n;
const BASE: Point = [BX, BY, 1n, m(BX * BY)];
/** √−1 mod p, for the second root candidate (RFC 8032 §5.1.3 step 3). */
const SQRT_M1 = 0x2b8324804fc1df0b2b4d00993dfbd7a72f431806ad2fe478c4ee1b274a0ea0b0n;

function pow(b: bigint, e: bigint): bigint {
  let r = 1n;
  for (; e > 0n; e >>= 1n, b = (b * b) % P) if (e & 1n) r = (r * b) % P;
  return r;
}

/** Inverse mod p by the extended Euclidean algorithm (several times faster than b^(p−2) in BigInt). */
function inv(a: bigint): bigint {
  let r0 = P;
  let r1 = m(a);
  let x0 = 0n;
  let x1 = 1n;
  while (r1 !== 0n) {
    const q = r0 / r1;
    [r0, r1] = [r1, r0 - q * r1];
    [x0, x1] = [x1, x0 - q * x1];
  }
  return m(x0);
}

/** a + b (add-2008-hwcd-3 for a = −1: complete, so it doubles and adds the identity too). */
function add([X1, Y1, Z1, T1]: Point, [X2, Y2, Z2, T2]: Point): Point {
  const A = m((Y1 - X1) * (Y2 - X2));
  const B = m((Y1 + X1) * (Y2 + X2));
  const C = m(T1 * D2 * T2);
  const Dd = m(2n * Z1 * Z2);
  const E = B - A;
  const F = Dd - C;
  const G = Dd + C;
  const H = B + A;
  return [m(E * F), m(G * H), m(F * G), m(E * H)];
}

/** 2a (dbl-2008-hwcd for a = −1). */
function double([X1, Y1, Z1]: Point): Point {
  const A = m(X1 * X1);
  const B = m(Y1 * Y1);
  const C = m(2n * Z1 * Z1);
  const E = m((X1 + Y1) * (X1 + Y1)) - A - B;
  const G = B - A;
  const F = G - C;
  const H = -A - B;
  return [m(E * F), m(G * H), m(F * G), m(E * H)];
}

const negate = ([X, Y, Z, T]: Point): Point => [m(-X), Y, Z, m(-T)];

/** The 32-byte encoding: y little-endian, the sign of x in the top bit. */
function encode([X, Y, Z]: Point): Uint8Array {
  const zi = inv(Z);
  const x = m(X * zi);
  let y = m(Y * zi) | ((x & 1n) << 255n);
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++, y >>= 8n) out[i] = Number(y & 0xffn);
  return out;
}

/** RFC 8032 §5.1.3 decoding of a canonical encoding (y < p checked by the caller), or undefined. */
function decode(b: Uint8Array): Point | undefined {
  const y = le(b) & ((1n << 255n) - 1n);
  const y2 = m(y * y);
  const u = m(y2 - 1n);
  const v = m(D * y2 + 1n);
  const v3 = m(v * v * v);
  let x = m(u * v3 * pow(m(u * v3 * v3 * v), (P - 5n) / 8n));
  const vx2 = m(v * x * x);
  if (vx2 !== u) {
    if (vx2 !== m(-u)) return undefined;
    x = m(x * SQRT_M1);
  }
  const sign = BigInt(b[31]! >> 7);
  if (x === 0n && sign) return undefined;
  if ((x & 1n) !== sign) x = P - x;
  return [x, y, 1n, m(x * y)];
}

/** P, 3P, 5P, …, 15P: the table a width-5 NAF digit indexes. */
function oddMultiples(p: Point): Point[] {
  const twice = double(p);
  const t = [p];
  for (let i = 1; i < 8; i++) t.push(add(t[i - 1]!, twice));
  return t;
}

let baseTable: Point[] | undefined;

/**
 * s·B + k·Q in one pass (Straus–Shamir, width-5 NAF): about 254 doublings and 85 additions with
 * an 8-point base table, so a device's first verification builds no big precomputation.
 */
function doubleScalarMul(s: bigint, k: bigint, qTable: Point[]): Point {
  const bt = (baseTable ??= oddMultiples(BASE));
  const ds = naf5(s);
  const dk = naf5(k);
  let top = ds.length - 1;
  while (top >= 0 && ds[top] === 0 && dk[top] === 0) top--;
  let acc = ZERO;
  for (let i = top; i >= 0; i--) {
    acc = double(acc);
    const a = ds[i]!;
    const b = dk[i]!;
    if (a) acc = add(acc, a > 0 ? bt[a >> 1]! : negate(bt[-a >> 1]!));
    if (b) acc = add(acc, b > 0 ? qTable[b >> 1]! : negate(qTable[-b >> 1]!));
  }
  return acc;
}

/**
 * The RFC 8032 §5.1.7 check for one public key, cofactorless: [S]B − [k]A must encode to R. The
 * key is decoded (a square root) and its table built once, not per signature; a key that does
 * not decode verifies nothing.
 * @example ed25519Verifier(pub32)(message, signature64) // true or false
 */
export function ed25519Verifier(pub: Uint8Array): (msg: Uint8Array, sig: Uint8Array) => boolean {
  const A = decode(pub);
  const minusA = A && oddMultiples(negate(A));
  return (msg, sig) => {
    if (!minusA) return false;
    const R = sig.subarray(0, 32);
    const k = le(sha512(concat(R, pub, msg))) % L;
    const check = encode(doubleScalarMul(le(sig.subarray(32)), k, minusA));
    let diff = 0;
    for (let i = 0; i < 32; i++) diff |= check[i]! ^ R[i]!;
    return diff === 0;
  };
}
