/**
 * UTF-8 without TextEncoder/TextDecoder, which QuickJS lacks. Strict both ways: a lone surrogate
 * cannot be encoded (it is not Unicode text, PROTOCOL.md §2) and invalid UTF-8 is refused.
 */
import { malformed } from '../errors.js';
import { hostTextEncode } from '../host.js';

const nativeEncode = hostTextEncode();
const SURROGATE = /[\ud800-\udfff]/;
const NON_ASCII = /[^\x00-\x7f]/;

/** Encodes a well-formed string as UTF-8. @example utf8Encode('é') // Uint8Array [0xc3, 0xa9] */
export function utf8Encode(text: string): Uint8Array {
  // The host's encoder is much faster, but silently replaces lone surrogates: only text
  // without any surrogate takes it (a paired one goes the careful way below).
  if (nativeEncode && !SURROGATE.test(text)) return nativeEncode(text);
  // ASCII, nearly every artifact's text, byte for byte (twice as fast as the general way in QuickJS).
  if (!NON_ASCII.test(text)) {
    const out = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i);
    return out;
  }
  // encodeURIComponent writes UTF-8 as %XX and throws on a lone surrogate (ECMA-262 Encode):
  // native in every engine, QuickJS too.
  let e: string;
  try {
    e = encodeURIComponent(text);
  } catch {
    return malformed('lone surrogate in text');
  }
  const out: number[] = [];
  for (let i = 0; i < e.length; i++) {
    if (e[i] === '%') {
      out.push(parseInt(e.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      out.push(e.charCodeAt(i));
    }
  }
  return Uint8Array.from(out);
}

/**
 * Decodes UTF-8, refusing overlong forms, surrogates, code points past U+10FFFF and truncation:
 * decodeURIComponent over the bytes as %XX, which must refuse all of them (ECMA-262 Decode).
 * @example utf8Decode(utf8Encode('ok')) // 'ok'
 */
export function utf8Decode(bytes: Uint8Array): string {
  let e = '';
  for (let i = 0; i < bytes.length; i++) e += (bytes[i]! < 16 ? '%0' : '%') + bytes[i]!.toString(16);
  try {
    return decodeURIComponent(e);
  } catch {
    return malformed('invalid UTF-8');
  }
}
