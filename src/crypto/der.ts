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

interface Tlv {
  tag: number;
  body: Uint8Array;
  next: number;
}

/** One DER TLV at `at`, minimal definite lengths only. */
function tlv(b: Uint8Array, at: number): Tlv {
  const tag = b[at];
  let len = b[at + 1];
  if (tag === undefined || len === undefined) return bad('truncated DER');
  let p = at + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n < 1 || n > 2) return bad('DER length');
    len = 0;
    for (let i = 0; i < n; i++) len = (len << 8) | (b[p++] ?? bad('truncated DER'));
    if (len < 0x80 || (n === 2 && len < 0x100)) return bad('non-minimal DER length');
  }
  if (p + len > b.length) return bad('truncated DER');
  return { tag, body: b.subarray(p, p + len), next: p + len };
}

/** The children of a constructed value, which must fill it exactly. */
function children(body: Uint8Array): Tlv[] {
  const out: Tlv[] = [];
  for (let at = 0; at < body.length; ) {
    const t = tlv(body, at);
    out.push(t);
    at = t.next;
  }
  return out;
}

function whole(t: Tlv): string {
  // Re-encode the header to compare a whole TLV against a hex constant (all ours are short).
  return hex(new Uint8Array([t.tag, t.body.length])) + hex(t.body);
}

/** Unwraps PEM; tolerates `\n` written literally, as env files often hold it. @example pemBody(pem).label // 'PUBLIC KEY' */
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

/** Reads a PKCS#8 (v1, or v2 with the public key) DER. @example parsePkcs8(der).alg // 'EdDSA' */
export function parsePkcs8(der: Uint8Array): RawPrivateKey {
  const top = tlv(der, 0);
  if (top.tag !== 0x30 || top.next !== der.length) return bad('PKCS#8 is not one SEQUENCE');
  const [ver, algId, key, pub, ...rest] = children(top.body);
  if (!ver || !algId || !key || rest.length) return bad('PKCS#8 shape');
  const v = whole(ver);
  if (v !== '020100' && v !== '020101') return bad('PKCS#8 version');
  if (key.tag !== 0x04) return bad('PKCS#8 privateKey');
  if (pub && (v !== '020101' || pub.tag !== 0x81)) return bad('PKCS#8 attributes are not supported');
  const a = hex(algId.body);
  if (algId.tag === 0x30 && a === OID_ED25519) {
    const seed = tlv(key.body, 0);
    if (seed.tag !== 0x04 || seed.body.length !== 32 || seed.next !== key.body.length) return bad('Ed25519 seed');
    let pk: Uint8Array | undefined;
    if (pub) {
      if (pub.body.length !== 33 || pub.body[0] !== 0) return bad('Ed25519 public key');
      pk = pub.body.slice(1);
    }
    return { alg: 'EdDSA', d: seed.body.slice(), ...(pk ? { pub: pk } : {}) };
  }
  if (algId.tag === 0x30 && a === OID_EC + OID_P256) {
    if (pub) return bad('PKCS#8 attributes are not supported');
    // RFC 5915 ECPrivateKey: version 1, 32-byte scalar, optional [0] curve, optional [1] public key.
    const ec = tlv(key.body, 0);
    if (ec.tag !== 0x30 || ec.next !== key.body.length) return bad('ECPrivateKey');
    const [ev, d, ...opt] = children(ec.body);
    if (!ev || !d || whole(ev) !== '020101' || d.tag !== 0x04 || d.body.length !== 32) return bad('ECPrivateKey');
    let pk: Uint8Array | undefined;
    let last = 0;
    for (const o of opt) {
      if (o.tag === 0xa0 && last < 1 && hex(o.body) === OID_P256) last = 1;
      else if (o.tag === 0xa1 && last < 2) {
        const bits = tlv(o.body, 0);
        if (bits.tag !== 0x03 || bits.next !== o.body.length || bits.body[0] !== 0) return bad('ECPrivateKey public key');
        pk = bits.body.slice(1);
        last = 2;
      } else return bad('ECPrivateKey');
    }
    return { alg: 'ES256', d: d.body.slice(), ...(pk ? { pub: pk } : {}) };
  }
  return bad('not an Ed25519 or P-256 PKCS#8 key');
}

/** SPKI DER of a raw public key. @example spki('EdDSA', pub32) // Uint8Array(44) */
export function spki(alg: Alg, key: Uint8Array): Uint8Array {
  const prefix = alg === 'EdDSA' ? SPKI_ED25519 : key.length === 33 ? SPKI_P256_COMPRESSED : SPKI_P256;
  return concat(hexDecode(prefix), key);
}

/** PKCS#8 DER (v1) of a raw private key; for P-256 the 65-byte public key is included when given. @example pkcs8('EdDSA', seed) */
export function pkcs8(alg: Alg, d: Uint8Array, pub?: Uint8Array): Uint8Array {
  if (alg === 'EdDSA') return concat(hexDecode(PKCS8_ED25519), d);
  return pub
    ? concat(hexDecode('308187020100301306072a8648ce3d020106082a8648ce3d030107046d306b0201010420'), d, hexDecode('a144034200'), pub)
    : concat(hexDecode('3041020100301306072a8648ce3d020106082a8648ce3d030107042730250201010420'), d);
}

/** Concatenates byte arrays. @example concat(a, b).length === a.length + b.length */
export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) out.set(p, (at += p.length) - p.length);
  return out;
}
