/**
 * PEM and the four DER shapes CTL keys come in (PKCS#8 and SPKI, Ed25519 and P-256), read with a
 * tiny strict DER reader. Anything else (SEC1 "EC PRIVATE KEY", encrypted keys, other curves,
 * attributes, BER lengths, trailing bytes) is `malformed`: keys are configuration, and a key we
 * half understand is worse than no key (PROTOCOL.md §3). No noble here: the edge build uses it.
 */
import { malformed } from '../errors.js';
import { base64DecodeLenient, base64Encode, hexDecode, hexEncode as hex } from '../encoding/base64url.js';
import type { Alg } from './types.js';

const bad = (what: string): never => {
  malformed(`key: ${what}`);
};

const OID_ED25519 = '06032b6570';
const OID_EC = '06072a8648ce3d0201';
const OID_P256 = '06082a8648ce3d030107';
// Fixed prefixes: DER is unique, so these shapes have exactly one encoding each.
const SPKI_ED25519 = '302a3005' + OID_ED25519 + '032100';
const SPKI_P256 = '3059301306072a8648ce3d020106082a8648ce3d030107034200';
const SPKI_P256_COMPRESSED = '3039301306072a8648ce3d020106082a8648ce3d030107032200';
const PKCS8_ED25519 = '302e0201003005' + OID_ED25519 + '04220420';

/** A raw private key with what its container said about it. */
export interface RawPrivateKey {
  alg: Alg;
  /** Ed25519 seed or P-256 scalar, 32 bytes. */
  d: Uint8Array;
  /** The public key the container carried, if any (SEC1 or Ed25519 raw), to be checked against `d`. */
  pub?: Uint8Array;
}

/** A raw public key: Ed25519 32 bytes, P-256 SEC1 (65 uncompressed or 33 compressed). */
export interface RawPublicKey {
  alg: Alg;
  key: Uint8Array;
}

/**
 * Unwraps PEM; tolerates `\n` written literally, as env files often hold it. @example pemBody(pem).label // 'PUBLIC
 * KEY'
 */
export function pemBody(text: string): { label: string; der: Uint8Array } {
  if (typeof text !== 'string' || text.length > 16384) return bad('not a PEM');
  const m = /^\s*-----BEGIN ([A-Z ]+)-----([A-Za-z0-9+/=\s]*)-----END \1-----\s*$/.exec(text.replace(/\\n/g, '\n'));
  if (!m) return bad('not a PEM');
  return { label: m[1]!, der: base64DecodeLenient(m[2]!.replace(/\s+/g, '')) };
}

/** PEM armour, 64 columns. @example pem('PUBLIC KEY', der) // '-----BEGIN PUBLIC KEY-----\n...' */
export function pem(label: string, der: Uint8Array): string {
  const b = base64Encode(der);
  let out = `-----BEGIN ${label}-----\n`;
  for (let i = 0; i < b.length; i += 64) out += b.slice(i, i + 64) + '\n';
  return out + `-----END ${label}-----\n`;
}

/** Reads an SPKI DER. @example parseSpki(der) // { alg: 'EdDSA', key: Uint8Array(32) } */
export function parseSpki(der: Uint8Array): RawPublicKey {
  const h = hex(der);
  if (der.length === 44 && h.startsWith(SPKI_ED25519)) return { alg: 'EdDSA', key: der.slice(12) };
  if (der.length === 91 && h.startsWith(SPKI_P256)) return { alg: 'ES256', key: der.slice(26) };
  if (der.length === 59 && h.startsWith(SPKI_P256_COMPRESSED)) return { alg: 'ES256', key: der.slice(26) };
  return bad('not an Ed25519 or P-256 SubjectPublicKeyInfo');
}

// PKCS#8 as a pattern over its hex with every length left open; what matched is then written back
// with minimal lengths and must be the very bytes given. DER is unique, so this is as strict as a
// TLV parser, and smaller. Ed25519: v1, or v2 with its [1] public key. P-256 (no attributes): an
// RFC 5915 ECPrivateKey (version 1, the scalar, optional [0] curve, optional [1] public key).
const L = '(?:81)?[0-9a-f]{2}';
// Both with the groups version, key, [0] curve (P-256 only: `()` for Ed25519), public key.
const ED = new RegExp(`^30${L}02010([01])3005${OID_ED25519}04${L}0420([0-9a-f]{64})()(?:812100([0-9a-f]{64}))?$`);
const EC = new RegExp(
  `^30${L}02010([01])3013${OID_EC}${OID_P256}04${L}30${L}0201010420([0-9a-f]{64})` +
    `(a00a${OID_P256})?(?:a1${L}03${L}00([0-9a-f]+))?$`,
);

/** A DER TLV in hex with a minimal definite length (bodies here are under 256 bytes). */
const tlvHex = (tag: string, body: string): string => {
  const n = body.length / 2;
  return tag + (n < 128 ? '' : '81') + (n < 16 ? '0' : '') + n.toString(16) + body;
};

/** Reads a PKCS#8 (v1, or v2 with the public key) DER. @example parsePkcs8(der).alg // 'EdDSA' */
export function parsePkcs8(der: Uint8Array): RawPrivateKey {
  const h = hex(der);
  const ed = ED.exec(h);
  const [, v, d, params = '', pub] = ed ?? EC.exec(h) ?? bad('not an Ed25519 or P-256 PKCS#8 key');
  if (ed && pub && v !== '1') bad('PKCS#8 attributes need version 2');
  const key = ed
    ? tlvHex('04', '0420' + d) + (pub ? '812100' + pub : '')
    : tlvHex(
        '04',
        tlvHex('30', '0201010420' + d + params + (pub === undefined ? '' : tlvHex('a1', tlvHex('03', '00' + pub)))),
      );
  if (tlvHex('30', '02010' + v + (ed ? '3005' + OID_ED25519 : '3013' + OID_EC + OID_P256) + key) !== h)
    bad('not DER (non-minimal or wrong lengths)');
  return { alg: ed ? 'EdDSA' : 'ES256', d: hexDecode(d!), ...(pub ? { pub: hexDecode(pub) } : {}) };
}

/** SPKI DER of a raw public key. @example spki('EdDSA', pub32) // Uint8Array(44) */
export function spki(alg: Alg, key: Uint8Array): Uint8Array {
  const prefix = alg === 'EdDSA' ? SPKI_ED25519 : key.length === 33 ? SPKI_P256_COMPRESSED : SPKI_P256;
  return concat(hexDecode(prefix), key);
}

/**
 * PKCS#8 DER (v1) of a raw private key; for P-256 the 65-byte public key is included when given. @example
 * pkcs8('EdDSA', seed)
 */
export function pkcs8(alg: Alg, d: Uint8Array, pub?: Uint8Array): Uint8Array {
  if (alg === 'EdDSA') return concat(hexDecode(PKCS8_ED25519), d);
  return pub
    ? concat(
        hexDecode('308187020100301306072a8648ce3d020106082a8648ce3d030107046d306b0201010420'),
        d,
        hexDecode('a144034200'),
        pub,
      )
    : concat(hexDecode('3041020100301306072a8648ce3d020106082a8648ce3d030107042730250201010420'), d);
}

/** Concatenates byte arrays. @example concat(a, b).length === a.length + b.length */
export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
