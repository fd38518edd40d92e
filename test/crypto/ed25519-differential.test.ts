// Our Ed25519 verifications against OpenSSL's (node:crypto), case by case: thousands of mutated
// signatures, keys and messages from a fixed seed, through each backend as a verifier imports a
// key (PROTOCOL.md §3: the strict rules, then the cofactorless equation [S]B − [k]A = R). The
// verify-only build's BigInt Ed25519 (ed25519-verify.ts), the full noble backend and the native
// one must give the same answer on every case; noble's own verify, cofactored even with
// `zip215: false`, does not (mixed-order keys and R), which is why neither noble build uses it.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as nodeCrypto from 'node:crypto';
import * as ed from '@noble/ed25519';
import { ed25519 } from '@noble/curves/ed25519.js';
import { createNodeBackend } from '../../src/crypto/node-backend.js';
import { createNobleBackend as createVerifyOnlyBackend } from '../../src/crypto/noble-verify-backend.js';
import { createNobleBackend } from '../../src/crypto/noble-backend.js';
import { ed25519ShapeOk, signatureShapeOk, L, P } from '../../src/crypto/strict.js';
import { base64urlEncode } from '../../src/encoding/base64url.js';
import type { Backend } from '../../src/crypto/backend.js';

ed.hashes.sha512 = (m: Uint8Array) => new Uint8Array(nodeCrypto.createHash('sha512').update(m).digest());

const CASES = 2400;
const SEED = 'ctl-ed25519-differential/1';

/** Deterministic bytes: SHA-256 of the seed and a counter. */
let counter = 0;
function bytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i += 32) {
    const block = nodeCrypto.createHash('sha256').update(`${SEED}:${counter++}`).digest();
    out.set(block.subarray(0, Math.min(32, n - i)), i);
  }
  return out;
}
const int = (below: number) => {
  const b = bytes(3);
  return ((b[0]! << 16) | (b[1]! << 8) | b[2]!) % below;
};
const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;

const le = (b: Uint8Array) => BigInt('0x' + (Buffer.from(b).reverse().toString('hex') || '0'));
const le32 = (n: bigint) => new Uint8Array(Buffer.from(n.toString(16).padStart(64, '0'), 'hex').reverse());
const mod = (a: bigint, m: bigint) => ((a % m) + m) % m;
const sha512 = (...parts: Uint8Array[]) =>
  new Uint8Array(nodeCrypto.createHash('sha512').update(Buffer.concat(parts)).digest());
const challenge = (R: Uint8Array, A: Uint8Array, msg: Uint8Array) => mod(le(sha512(R, A, msg)), L);

type Point = InstanceType<typeof ed25519.Point>;

// The eight points of small order, by encoding (y, sign of x): identity, order 2, 4 and 8.
const C8 = 2707385501144840649318225287225658788936804267575313519463743609750303402022n;
const withSign = (y: bigint, sign: number) => {
  const e = le32(y);
  e[31]! |= sign << 7;
  return e;
};
const SMALL_ENCODINGS = [
  withSign(1n, 0),
  withSign(P - 1n, 0),
  withSign(0n, 0),
  withSign(0n, 1),
  withSign(C8, 0),
  withSign(C8, 1),
  withSign(P - C8, 0),
  withSign(P - C8, 1),
];
const TORSION: Point[] = SMALL_ENCODINGS.slice(1).map((e) => ed25519.Point.fromBytes(e));
/** Encodings that are not canonical (y ≥ p), some of which decode to a point if y were reduced. */
const NON_CANONICAL = [...Array(19).keys()].flatMap((y) => [withSign(P + BigInt(y), 0), withSign(P + BigInt(y), 1)]);
/** The identity with x's sign bit set: x = 0 cannot be negative (RFC 8032 §5.1.3 step 4). */
const NEGATIVE_ZERO = [withSign(1n, 1), withSign(P - 1n, 1)];

interface Case {
  kind: string;
  pub: Uint8Array;
  msg: Uint8Array;
  sig: Uint8Array;
}

/** A key from a seed, and its scalar (RFC 8032 §5.1.5), so cases can sign with points of their own. */
function keyOf(seed: Uint8Array) {
  const h = sha512(seed);
  h[0]! &= 248;
  h[31]! &= 127;
  h[31]! |= 64;
  const a = le(h.subarray(0, 32));
  return { a, pub: ed25519.Point.BASE.multiplyUnsafe(mod(a, L)).toBytes() };
}

/** A signature under `pub` (a·B, or a·B + torsion) with nonce point r·B, or r·B + `rTorsion`. */
function signWith(a: bigint, pub: Uint8Array, msg: Uint8Array, rTorsion?: Point) {
  const nonce = keyOf(bytes(32));
  const Rb = rTorsion ? ed25519.Point.fromBytes(nonce.pub).add(rTorsion).toBytes() : nonce.pub;
  const S = mod(nonce.a + challenge(Rb, pub, msg) * a, L);
  return { pub, sig: new Uint8Array([...Rb, ...le32(S)]) };
}

function flip(b: Uint8Array, bits = 1 + int(3)): Uint8Array {
  const out = b.slice();
  for (let i = 0; i < bits; i++) {
    const at = int(out.length * 8);
    out[at >> 3]! ^= 1 << (at & 7);
  }
  return out;
}

function validCase(): Case & { key: ReturnType<typeof keyOf> } {
  const key = keyOf(bytes(32));
  const msg = bytes(pick([0, 1, 31, 64, 100, 1000]));
  const s = signWith(key.a, key.pub, msg);
  return { kind: 'valid', key, msg, ...s };
}

const MUTATIONS: Record<string, () => Case> = {
  valid: () => validCase(),
  'signature bit flip': () => {
    const c = validCase();
    return { ...c, sig: flip(c.sig) };
  },
  'message bit flip': () => {
    const c = validCase();
    return c.msg.length ? { ...c, msg: flip(c.msg) } : { ...c, msg: new Uint8Array([0]) };
  },
  'message shortened or extended': () => {
    const c = validCase();
    return { ...c, msg: int(2) ? c.msg.subarray(0, Math.max(0, c.msg.length - 1)) : new Uint8Array([...c.msg, 0]) };
  },
  'key bit flip': () => {
    const c = validCase();
    return { ...c, pub: flip(c.pub) };
  },
  'key negated (sign bit)': () => {
    const c = validCase();
    const pub = c.pub.slice();
    pub[31]! ^= 0x80;
    return { ...c, pub };
  },
  'another key': () => ({ ...validCase(), pub: keyOf(bytes(32)).pub }),
  'S + k·L (non-canonical S)': () => {
    const c = validCase();
    const S = le(c.sig.subarray(32)) + BigInt(1 + int(15)) * L;
    return { ...c, sig: new Uint8Array([...c.sig.subarray(0, 32), ...le32(S)]) };
  },
  'S at the bounds': () => {
    const c = validCase();
    const S = pick([0n, 1n, L - 1n, L, L + 1n, 2n ** 253n - 1n, 2n ** 256n - 1n]);
    return { ...c, sig: new Uint8Array([...c.sig.subarray(0, 32), ...le32(S)]) };
  },
  'R of small order': () => {
    const c = validCase();
    return { ...c, sig: new Uint8Array([...pick(SMALL_ENCODINGS), ...le32(pick([0n, le(bytes(32)) % L]))]) };
  },
  'R non-canonical or x = −0': () => {
    const c = validCase();
    return { ...c, sig: new Uint8Array([...pick([...NON_CANONICAL, ...NEGATIVE_ZERO]), ...c.sig.subarray(32)]) };
  },
  'R with torsion added (mixed order)': () => {
    const key = keyOf(bytes(32));
    const msg = bytes(32);
    return { kind: '', msg, ...signWith(key.a, key.pub, msg, pick(TORSION)) };
  },
  'key of small order': () => {
    // [S]B − [k]A = R for S = 0, R = −[k]A: a signature for any message if A had no checks.
    const A = ed25519.Point.fromBytes(pick(SMALL_ENCODINGS));
    const msg = bytes(16);
    const Rpick = pick(SMALL_ENCODINGS);
    const k = challenge(Rpick, A.toBytes(), msg);
    const R = int(2) ? Rpick : A.multiplyUnsafe(k).negate().toBytes();
    return { kind: '', pub: A.toBytes(), msg, sig: new Uint8Array([...R, ...le32(0n)]) };
  },
  'key non-canonical or x = −0': () => {
    const c = validCase();
    return { ...c, pub: pick([...NON_CANONICAL, ...NEGATIVE_ZERO]) };
  },
  'key with torsion added (mixed order)': () => {
    const key = keyOf(bytes(32));
    const A = ed25519.Point.fromBytes(key.pub).add(pick(TORSION)).toBytes();
    const msg = bytes(32);
    return { kind: '', msg, ...signWith(key.a, A, msg) };
  },
  'random key and signature': () => {
    const sig = bytes(64);
    if (int(2)) sig.set(le32(le(sig.subarray(32)) % L), 32);
    return { kind: '', pub: bytes(32), msg: bytes(int(64)), sig };
  },
};

function cases(count = CASES): Case[] {
  counter = 0;
  const kinds = Object.keys(MUTATIONS);
  return Array.from({ length: count }, (_, i) => {
    const kind = kinds[i % kinds.length]!;
    const { pub, msg, sig } = MUTATIONS[kind]!();
    return { kind, pub, msg, sig };
  });
}

/** OpenSSL alone: any 32 bytes as a key, no §3 rule of ours. */
function openssl(c: Case): boolean {
  try {
    const key = nodeCrypto.createPublicKey({
      key: { kty: 'OKP', crv: 'Ed25519', x: base64urlEncode(c.pub) },
      format: 'jwk',
    });
    return nodeCrypto.verify(null, c.msg, key, c.sig);
  } catch {
    return false;
  }
}

/** A backend as a verifier uses it: the key imported under §3 (or refused), then the signature. */
async function viaBackend(backend: Backend, c: Case): Promise<boolean> {
  let key;
  try {
    key = await backend.verifierFromJwk({ kty: 'OKP', crv: 'Ed25519', x: base64urlEncode(c.pub) });
  } catch {
    return false;
  }
  return key.verify(c.msg, c.sig);
}

const all = cases();
const byOpenssl = all.map(openssl);
const reachesEquation = (c: Case) => ed25519ShapeOk(c.pub) && signatureShapeOk('EdDSA', c.sig);

test('the cases are deterministic and cover every mutation, valid and invalid', () => {
  const again = cases(50);
  assert.equal(
    again.map((c) => base64urlEncode(c.sig)),
    all.slice(0, 50).map((c) => base64urlEncode(c.sig)),
  );
  const kinds = new Set(all.map((c) => c.kind));
  assert.is(kinds.size, Object.keys(MUTATIONS).length);
  const accepted = byOpenssl.filter(Boolean).length;
  assert.ok(accepted > CASES / 20 && accepted < CASES / 2, `OpenSSL accepted ${accepted} of ${CASES}`);
});

test('the BigInt Ed25519 (ctl/verify), the noble backend and node:crypto agree on every case', async () => {
  const backends: [string, Backend][] = [
    ['verify-only (ed25519-verify.ts)', createVerifyOnlyBackend()],
    ['noble', createNobleBackend()],
    ['native (node:crypto)', createNodeBackend(nodeCrypto)],
  ];
  const disagree: string[] = [];
  const acceptedByKind: Record<string, number> = {};
  for (const [i, c] of all.entries()) {
    // OpenSSL's answer under the §3 rules every backend applies first.
    const expected = reachesEquation(c) && byOpenssl[i]!;
    if (expected) acceptedByKind[c.kind] = (acceptedByKind[c.kind] ?? 0) + 1;
    for (const [name, backend] of backends) {
      const got = await viaBackend(backend, c);
      if (got !== expected) disagree.push(`case ${i} (${c.kind}): ${name} says ${got}, OpenSSL ${expected}`);
    }
  }
  assert.equal(disagree.slice(0, 20), []);
  // Not vacuous: every valid signature passes, and half the mixed-order keys do (those whose
  // challenge k kills the torsion: kT = 0), which only a cofactorless check tells apart.
  assert.is(acceptedByKind['valid'], CASES / Object.keys(MUTATIONS).length);
  const mixed = acceptedByKind['key with torsion added (mixed order)'] ?? 0;
  assert.ok(mixed > 0 && mixed < CASES / Object.keys(MUTATIONS).length, `mixed-order keys accepted: ${mixed}`);
});

test("noble's own verify (cofactored) disagrees with OpenSSL on mixed-order keys and R", () => {
  let differ = 0;
  for (const [i, c] of all.entries()) {
    if (!c.kind.includes('mixed order') || !reachesEquation(c)) continue;
    let noble: boolean;
    try {
      noble = ed.verify(c.sig, c.msg, c.pub, { zip215: false });
    } catch {
      noble = false;
    }
    if (noble !== byOpenssl[i]) differ++;
  }
  assert.ok(differ > 50, `noble's verify differs from OpenSSL on ${differ} mixed-order cases`);
});

test.run();
