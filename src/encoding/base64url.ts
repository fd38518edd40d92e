/**
 * base64url without padding (RFC 4648 §5), strict: padding, `+`, `/`, white space and
 * non-canonical trailing bits are refused (PROTOCOL.md §1). Standard base64 is here too, for the
 * one place the spec asks for it (the HTTP presentation, PROTOCOL.md §6).
 */
import { CtlError, malformed } from '../errors.js';

const URL_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const STD_ALPHABET = URL_ALPHABET.slice(0, 62) + '+/';
const URL_LOOKUP = lookup(URL_ALPHABET);
const STD_LOOKUP = lookup(STD_ALPHABET);

function lookup(alphabet: string): Int16Array {
  const t = new Int16Array(128).fill(-1);
  for (let i = 0; i < alphabet.length; i++) t[alphabet.charCodeAt(i)] = i;
  return t;
}

/** Six bits at a time, as `decode` reads them back; the last group is zero-filled on the right. */
function encode(bytes: Uint8Array, alphabet: string, pad: boolean): string {
  let out = '';
  let acc = 0;
  let bits = 0;
  for (let i = 0; i < bytes.length; i++) {
    acc = ((acc << 8) | bytes[i]!) & 0xfff;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += alphabet[(acc >> bits) & 63]!;
    }
  }
  if (bits) out += alphabet[(acc << (6 - bits)) & 63]!;
  return pad ? out + '=='.slice(0, (4 - (out.length % 4)) % 4) : out;
}

function decode(text: string, table: Int16Array, what: string): Uint8Array {
  if (typeof text !== 'string') malformed(`${what}: not a string`);
  if (text.length % 4 === 1) malformed(`${what}: bad length`);
  const out = new Uint8Array(Math.floor((text.length * 3) / 4));
  let bits = 0;
  let acc = 0;
  let o = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const v = c < 128 ? table[c]! : -1;
    if (v < 0) malformed(`${what}: invalid character`);
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (acc >> bits) & 0xff;
      acc &= (1 << bits) - 1;
    }
  }
  if (acc !== 0) malformed(`${what}: non-canonical trailing bits`);
  return out.subarray(0, o);
}

/** @example base64urlEncode(new Uint8Array([251, 255])) // '-_8' */
export function base64urlEncode(bytes: Uint8Array): string {
  return encode(bytes, URL_ALPHABET, false);
}

/** Strict decoder; throws `CtlError('malformed')`. @example base64urlDecode('-_8') // Uint8Array [251, 255] */
export function base64urlDecode(text: string): Uint8Array {
  return decode(text, URL_LOOKUP, 'base64url');
}

/** Standard padded base64 (RFC 4648 §4). @example base64Encode(new Uint8Array([1])) // 'AQ==' */
export function base64Encode(bytes: Uint8Array): string {
  return encode(bytes, STD_ALPHABET, true);
}

/**
 * Strict standard base64 (RFC 4648 §4): padding required and exact, canonical trailing bits, no
 * white space, as the C2SP signed-note and checkpoint formats write it. Throws `CtlError('malformed')`.
 * @example base64Decode('AQ==') // Uint8Array [1]
 */
export function base64Decode(text: string): Uint8Array {
  if (typeof text !== 'string' || text.length % 4 !== 0) malformed('base64: bad length');
  const body = text.replace(/={1,2}$/, '');
  if (body.length % 4 === 1) malformed('base64: bad padding');
  return decode(body, STD_LOOKUP, 'base64');
}

/**
 * Decodes standard base64 (padding optional but, when present, exact) or base64url, as the
 * HTTP presentation allows both (PROTOCOL.md §6). @example base64DecodeLenient('AQ==')
 */
export function base64DecodeLenient(text: string): Uint8Array {
  if (typeof text !== 'string') malformed('base64: not a string');
  let body = text;
  const padAt = text.indexOf('=');
  if (padAt >= 0) {
    body = text.slice(0, padAt);
    const pad = text.slice(padAt);
    if (!/^={1,2}$/.test(pad) || text.length % 4 !== 0) malformed('base64: bad padding');
  }
  const urlSafe = /[-_]/.test(body);
  if (urlSafe && /[+/]/.test(body)) malformed('base64: mixed alphabets');
  return decode(body, urlSafe ? URL_LOOKUP : STD_LOOKUP, 'base64');
}

/** Lowercase hex. @example hexEncode(new Uint8Array([0xab])) // 'ab' */
export function hexEncode(bytes: Uint8Array): string {
  let out = '';
  for (let i = 0; i < bytes.length; i++) out += (bytes[i]! < 16 ? '0' : '') + bytes[i]!.toString(16);
  return out;
}

/** Strict hex (even length, [0-9a-fA-F]). @example hexDecode('ab') // Uint8Array [0xab] */
export function hexDecode(text: string): Uint8Array {
  if (typeof text !== 'string' || text.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(text)) {
    malformed('hex: invalid');
  }
  const out = new Uint8Array(text.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(text.slice(i * 2, i * 2 + 2), 16);
  return out;
}
