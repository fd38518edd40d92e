/**
 * UTF-8 without TextEncoder/TextDecoder, which QuickJS lacks. Strict both ways: a lone surrogate
 * cannot be encoded (it is not Unicode text, PROTOCOL.md §2) and invalid UTF-8 is refused.
 */
import { malformed } from '../errors.js';
import { hostTextEncode } from '../host.js';

const nativeEncode = hostTextEncode();
const SURROGATE = /[\ud800-\udfff]/;

/** Encodes a well-formed string as UTF-8. @example utf8Encode('é') // Uint8Array [0xc3, 0xa9] */
export function utf8Encode(text: string): Uint8Array {
  // The host's encoder is much faster, but silently replaces lone surrogates: only text
  // without any surrogate takes it (a paired one goes the careful way below).
  if (nativeEncode && !SURROGATE.test(text)) return nativeEncode(text);
  // Fast path for ASCII, by far the common case in artifacts.
  let ascii = true;
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) > 0x7f) { ascii = false; break; }
  if (ascii) {
    const out = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i);
    return out;
  }
  const out: number[] = [];
  for (let i = 0; i < text.length; i++) {
    let c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdfff) {
      const d = text.charCodeAt(i + 1);
      if (c > 0xdbff || !(d >= 0xdc00 && d <= 0xdfff)) malformed('lone surrogate in text');
      c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
      i++;
    }
    if (c < 0x80) out.push(c);
    else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
    else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
  }
  return Uint8Array.from(out);
}

/** Decodes UTF-8, refusing overlong forms, surrogates and truncation. @example utf8Decode(utf8Encode('ok')) // 'ok' */
export function utf8Decode(bytes: Uint8Array): string {
  let out = '';
  for (let i = 0; i < bytes.length; ) {
    const b = bytes[i]!;
    let c: number;
    let n: number;
    if (b < 0x80) { c = b; n = 0; }
    else if (b >= 0xc2 && b <= 0xdf) { c = b & 0x1f; n = 1; }
    else if (b >= 0xe0 && b <= 0xef) { c = b & 0x0f; n = 2; }
    else if (b >= 0xf0 && b <= 0xf4) { c = b & 0x07; n = 3; }
    else malformed('invalid UTF-8');
    if (n > 0 && i + n >= bytes.length) {
      malformed('truncated UTF-8');
    }
    for (let k = 1; k <= n; k++) {
      const cb = bytes[i + k]!;
      if ((cb & 0xc0) !== 0x80) malformed('invalid UTF-8');
      c = (c << 6) | (cb & 0x3f);
    }
    if ((n === 2 && c < 0x800) || (n === 3 && (c < 0x10000 || c > 0x10ffff)) || (c >= 0xd800 && c <= 0xdfff)) {
      malformed('invalid UTF-8');
    }
    out += c < 0x10000 ? String.fromCharCode(c) : String.fromCharCode(0xd800 + ((c - 0x10000) >> 10), 0xdc00 + ((c - 0x10000) & 0x3ff));
    i += n + 1;
  }
  return out;
}
