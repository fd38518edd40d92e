/**
 * JWKs for Ed25519 (OKP) and P-256 (EC): strict reading, the RFC 7638 thumbprint members, and
 * conversion to and from raw bytes. The algorithm comes from `kty`/`crv`, never from an artifact
 * (PROTOCOL.md §3). No noble here: the edge build uses this file too.
 */
import { CtlError, malformed } from '../errors.js';
import { base64urlDecode, base64urlEncode } from '../encoding/base64url.js';
import { ed25519KeyOk, ed25519ShapeOk, p256Point, beBytes } from './strict.js';
import { concat } from './der.js';
import type { Alg, PublicJwk } from './types.js';

/** Throws `CtlError('malformed')` about a key. @example badKey('not a PEM') */
export const badKey = (what: string): never => {
  malformed(`key: ${what}`);
};
const bad = badKey;

/** A checked public key: its algorithm, thumbprint members, and raw bytes (Ed25519 32, P-256 65 uncompressed). */
export interface CheckedPublicKey {
  alg: Alg;
  jwk: PublicJwk;
  raw: Uint8Array;
}

function coord(v: unknown, what: string): Uint8Array {
  const b = typeof v === 'string' ? base64urlDecode(v) : bad(`${what} is not a string`);
  return b.length === 32 ? b : bad(`${what} is not 32 bytes`);
}

/**
 * The algorithm a JWK's `kty`/`crv` name; `alg`, when present, must agree.
 * @example jwkAlg({ kty: 'OKP', crv: 'Ed25519', x }) // 'EdDSA'
 */
export function jwkAlg(jwk: unknown): Alg {
  const j = (jwk && typeof jwk === 'object' ? jwk : bad('JWK is not an object')) as Record<string, unknown>;
  const alg: Alg =
    j['kty'] === 'OKP' && j['crv'] === 'Ed25519'
      ? 'EdDSA'
      : j['kty'] === 'EC' && j['crv'] === 'P-256'
        ? 'ES256'
        : bad('JWK is not Ed25519 or P-256');
  // RFC 9864 names Ed25519 "Ed25519" (WebCrypto exports it so); "EdDSA" is the name §3 uses.
  if (j['alg'] !== undefined && j['alg'] !== alg && !(alg === 'EdDSA' && j['alg'] === 'Ed25519'))
    bad('JWK alg does not match its curve');
  return alg;
}

/**
 * Reads a public JWK (extra members such as `kid`, `alg`, `purposes`, `d` are ignored) and checks
 * it under §3: canonical, on the curve, not of small order. Throws `CtlError('malformed')`.
 * `onCurve = false` skips the one costly step (an exponentiation) for keys a backend derived
 * itself from a private key, which are on the curve by construction.
 * @example checkPublicJwk({ kty: 'OKP', crv: 'Ed25519', x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo' }).alg //
 * 'EdDSA'
 */
export function checkPublicJwk(input: unknown, onCurve = true): CheckedPublicKey {
  const alg = jwkAlg(input);
  const j = input as Record<string, unknown>;
  const x = coord(j['x'], 'x');
  if (alg === 'EdDSA') {
    if (j['y'] !== undefined) bad('OKP JWK has y');
    if (onCurve ? !ed25519KeyOk(x) : !ed25519ShapeOk(x))
      bad('Ed25519 public key is non-canonical, of small order or not on the curve');
    return { alg, jwk: { kty: 'OKP', crv: 'Ed25519', x: j['x'] as string }, raw: x };
  }
  const raw = concat(new Uint8Array([4]), x, coord(j['y'], 'y'));
  if (!p256Point(raw)) bad('P-256 public key is not on the curve');
  return { alg, jwk: { kty: 'EC', crv: 'P-256', x: j['x'] as string, y: j['y'] as string }, raw };
}

/**
 * A checked public key from raw bytes: Ed25519 32 bytes, P-256 SEC1 65 or 33 bytes.
 * @example checkRawPublic('EdDSA', pub32).jwk.x
 */
export function checkRawPublic(alg: Alg, key: Uint8Array): CheckedPublicKey {
  if (alg === 'EdDSA') {
    if (key.length !== 32) bad('Ed25519 public key is not 32 bytes');
    return checkPublicJwk({ kty: 'OKP', crv: 'Ed25519', x: base64urlEncode(key) });
  }
  const pt = p256Point(key) ?? bad('P-256 public key is not a point of the curve');
  return checkPublicJwk({
    kty: 'EC',
    crv: 'P-256',
    x: base64urlEncode(beBytes(pt.x, 32)),
    y: base64urlEncode(beBytes(pt.y, 32)),
  });
}

/**
 * The private scalar or seed of a JWK with `d`, with its claimed public half. @example privateJwk(jwk).d.length // 32
 */
export function privateJwk(input: unknown): { alg: Alg; d: Uint8Array; claimed: CheckedPublicKey | undefined } {
  const alg = jwkAlg(input);
  const j = input as Record<string, unknown>;
  const d = coord(j['d'], 'd');
  return { alg, d, claimed: j['x'] === undefined ? undefined : checkPublicJwk(j) };
}

/**
 * The RFC 7638 thumbprint input: the required members in lexicographic order, no white space.
 * @example thumbprintInput({ kty: 'OKP', crv: 'Ed25519', x: 'abc' }) // '{"crv":"Ed25519","kty":"OKP","x":"abc"}'
 */
export function thumbprintInput(members: Record<string, string>): string {
  // The member values of our JWKs are base64url or fixed names, so JSON.stringify is exact (RFC 7638 §3.3).
  return (
    '{' +
    Object.keys(members)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${JSON.stringify(members[k])}`)
      .join(',') +
    '}'
  );
}

/**
 * The thumbprint members of a public JWK, shape-checked (lengths, base64url), no curve maths. @example
 * thumbprintMembers(jwk)
 */
export function thumbprintMembers(jwk: PublicJwk): Record<string, string> {
  const alg = jwkAlg(jwk);
  coord(jwk.x, 'x');
  if (alg === 'EdDSA') return jwk.y === undefined ? { crv: 'Ed25519', kty: 'OKP', x: jwk.x } : bad('OKP JWK has y');
  coord(jwk.y, 'y');
  return { crv: 'P-256', kty: 'EC', x: jwk.x, y: jwk.y! };
}

/** A stable cache key for a checked public JWK. @example jwkKey(jwk) // 'OKP:Ed25519:...' */
export function jwkKey(jwk: PublicJwk): string {
  return `${jwk.kty}:${jwk.crv}:${jwk.x}:${jwk.y ?? ''}`;
}
