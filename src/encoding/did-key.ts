/**
 * did:key (W3C did:key method) for the Human-Agent profile (PROTOCOL.md §10): Ed25519
 * (`did:key:z6Mk…`, multicodec 0xed) and P-256 (`did:key:zDn…`, multicodec 0x1200, compressed
 * point), multibase base58btc. The point maths is the crypto layer's strict checks (no noble):
 * the key a DID names is checked exactly as a JWK would be.
 */
import { fail } from '../errors.js';
import { base58Decode, base58Encode } from './base58.js';
import { checkPublicJwk, checkRawPublic } from '../crypto/jwk.js';
import type { PublicJwk } from '../crypto/types.js';

const ED25519 = 0xed;
const P256 = 0x1200;
/** Public-key multicodecs this build knows but does not accept: secp256k1, BLS12-381 G2, X25519, P-384, P-521, RSA. */
const UNSUPPORTED = [0xe7, 0xeb, 0xec, 0x1201, 0x1202, 0x1205];
/** Base58 of a did:key is at most ~50 characters for our two curves; longer is refused before decoding. */
const MAX_MULTIBASE = 128;
const DID_KEY = /^did:key:z[1-9A-HJ-NP-Za-km-z]{1,128}$/;

const malformed = (why: string): never => {
  fail('malformed', `did:key: ${why}`);
};

/** An unsigned LEB128 varint (multicodec), minimal, at most 3 bytes. */
function readVarint(b: Uint8Array): { code: number; length: number } {
  let code = 0;
  for (let i = 0; i < 3 && i < b.length; i++) {
    code |= (b[i]! & 0x7f) << (7 * i);
    if ((b[i]! & 0x80) === 0) {
      if (i > 0 && b[i] === 0) malformed('non-minimal multicodec varint');
      return { code, length: i + 1 };
    }
  }
  return malformed('bad multicodec varint');
}

function varint(code: number): number[] {
  const out: number[] = [];
  for (; code >= 0x80; code >>>= 7) out.push((code & 0x7f) | 0x80);
  out.push(code);
  return out;
}

/**
 * True when `value` has the syntax of a did:key (base58btc multibase); the key itself is checked by `didKeyToJwk`.
 * @example isDidKey('did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp') // true
 */
export function isDidKey(value: unknown): value is string {
  return typeof value === 'string' && DID_KEY.test(value);
}

/**
 * The DID URL naming the one key of a did:key, `<did>#<multibase>`: a human-issued grant's `keyId`.
 * @example didKeyUrl('did:key:z6Mk…') // 'did:key:z6Mk…#z6Mk…'
 */
export function didKeyUrl(did: string): string {
  return `${did}#${did.slice('did:key:'.length)}`;
}

/**
 * The public JWK a did:key names (its thumbprint members), checked under PROTOCOL.md §3's strict
 * rules. Throws `CtlError('malformed')` for a malformed DID or key and `unsupported_algorithm`
 * for a curve this build does not speak (P-384, P-521, secp256k1…).
 * @example didKeyToJwk('did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp') // { kty: 'OKP', crv: 'Ed25519', x:
 * 'O2onvM62pC1io6jQKm8Nc2UyFXcd4kOmOsBIoYtZ2ik' }
 */
export function didKeyToJwk(did: string): PublicJwk {
  if (typeof did !== 'string' || !did.startsWith('did:key:')) return malformed('must start with "did:key:"');
  const mb = did.slice('did:key:'.length);
  if (mb[0] !== 'z') return malformed('the multibase must be base58btc ("z")');
  if (mb.length > MAX_MULTIBASE) return malformed('too long');
  const bytes = base58Decode(mb.slice(1), 'did:key');
  const { code, length } = readVarint(bytes);
  const key = bytes.subarray(length);
  if (code === ED25519) {
    if (key.length !== 32) malformed('an Ed25519 key is 32 bytes');
    return checkRawPublic('EdDSA', key).jwk;
  }
  if (code === P256) {
    if (key.length !== 33 || (key[0] !== 2 && key[0] !== 3)) malformed('a P-256 key is a 33-byte compressed point');
    return checkRawPublic('ES256', key).jwk;
  }
  if (UNSUPPORTED.includes(code))
    fail(
      'unsupported_algorithm',
      `did:key: multicodec 0x${code.toString(16)} is not supported (Ed25519 and P-256 are)`,
    );
  return malformed(`unknown multicodec 0x${code.toString(16)}`);
}

/**
 * The did:key of an Ed25519 or P-256 public JWK (P-256 compressed, as the method requires).
 * @example didKeyFromJwk({ kty: 'OKP', crv: 'Ed25519', x: 'O2onvM62pC1io6jQKm8Nc2UyFXcd4kOmOsBIoYtZ2ik' }) //
 * 'did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp'
 */
export function didKeyFromJwk(jwk: PublicJwk): string {
  const { alg, raw } = checkPublicJwk(jwk);
  const key = alg === 'EdDSA' ? raw : Uint8Array.of(2 | (raw[64]! & 1), ...raw.subarray(1, 33));
  const prefix = varint(alg === 'EdDSA' ? ED25519 : P256);
  return 'did:key:z' + base58Encode(Uint8Array.of(...prefix, ...key));
}
