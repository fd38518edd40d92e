/**
 * base58btc (the Bitcoin alphabet), the multibase `z` encoding of did:key (PROTOCOL.md §10).
 * Strict: any character outside the alphabet is `malformed`. Quadratic, which is fine for the
 * 34–35 bytes of a did:key; callers bound the input length.
 */
import { CtlError, malformed } from '../errors.js';

const ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';

/** @example base58Encode(new Uint8Array([0, 1])) // '12' */
export function base58Encode(bytes: Uint8Array): string {
  const digits: number[] = [];
  for (const byte of bytes) {
    let carry = byte;
    for (let i = 0; i < digits.length; i++) {
      carry += digits[i]! << 8;
      digits[i] = carry % 58;
      carry = (carry / 58) | 0;
    }
    for (; carry > 0; carry = (carry / 58) | 0) digits.push(carry % 58);
  }
  let out = '';
  for (let i = 0; i < bytes.length && bytes[i] === 0; i++) out += '1';
  for (let i = digits.length - 1; i >= 0; i--) out += ALPHABET[digits[i]!];
  return out;
}

/**
 * Throws `CtlError('malformed')` on a character outside the alphabet. @example base58Decode('12') // Uint8Array [0, 1]
 */
export function base58Decode(text: string, what = 'base58'): Uint8Array {
  if (typeof text !== 'string') malformed(`${what}: not a string`);
  const bytes: number[] = [];
  for (const ch of text) {
    let carry = ALPHABET.indexOf(ch);
    if (carry < 0) malformed(`${what}: not base58btc`);
    for (let i = 0; i < bytes.length; i++) {
      carry += bytes[i]! * 58;
      bytes[i] = carry & 0xff;
      carry >>= 8;
    }
    for (; carry > 0; carry >>= 8) bytes.push(carry & 0xff);
  }
  let zeros = 0;
  while (zeros < text.length && text[zeros] === '1') zeros++;
  const out = new Uint8Array(zeros + bytes.length);
  for (let i = 0; i < bytes.length; i++) out[out.length - 1 - i] = bytes[i]!;
  return out;
}
