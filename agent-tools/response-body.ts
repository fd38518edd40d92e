/**
 * A merchant's answer as a tool result can carry it: JSON-RPC carries text, so a textual body is
 * given as UTF-8 text and anything else (an image, a PDF, bytes that are not UTF-8) as base64.
 */

const TEXTUAL_APPLICATION = [
  'json',
  'xml',
  'javascript',
  'ecmascript',
  'x-www-form-urlencoded',
  'graphql',
  'yaml',
  'x-yaml',
  'x-ndjson',
  'problem\\+json',
].join('|');
const TEXTUAL = new RegExp(
  '^\\s*(text\\/|application\\/(' + TEXTUAL_APPLICATION + ')\\b|[^;\\s]+\\/[^;\\s]+\\+(json|xml)\\b)',
  'i',
);
const utf8 = new TextDecoder('utf-8', { fatal: true });

export interface EncodedBody {
  body: string;
  bodyEncoding: 'text' | 'base64';
}

/**
 * Text when the content type is textual (or absent) and the bytes are valid UTF-8, else base64.
 * @example encodeBody(new Uint8Array([0xff]), 'image/png') // { body: '/w==', bodyEncoding: 'base64' }
 */
export function encodeBody(bytes: Uint8Array, contentType: string | null): EncodedBody {
  if (contentType === null || TEXTUAL.test(contentType)) {
    try {
      return { body: utf8.decode(bytes), bodyEncoding: 'text' };
    } catch {
      // declared as text but not UTF-8: the bytes, exactly
    }
  }
  return { body: Buffer.from(bytes).toString('base64'), bodyEncoding: 'base64' };
}

/** The most of a response body a tool result carries by default (a model's context is small). */
export const DEFAULT_MAX_BODY_BYTES = 65_536;
/** The most an agent may ask for: the gateway itself answers at most 1 MiB. */
export const MAX_BODY_BYTES = 1_048_576;

/**
 * The first `max` bytes of `bytes`, cut before a UTF-8 sequence that would not fit whole (so a
 * textual body stays valid text), and whether anything was cut.
 * @example limitBody(new TextEncoder().encode('héllo'), 2) // { bytes: [0x68], truncated: true }
 */
export function limitBody(bytes: Uint8Array, max: number): { bytes: Uint8Array; truncated: boolean } {
  if (bytes.length <= max) return { bytes, truncated: false };
  let end = max;
  // Back off over continuation bytes (10xxxxxx) to the start of the sequence that was cut.
  while (end > 0 && end > max - 3 && (bytes[end]! & 0xc0) === 0x80) end--;
  return { bytes: bytes.subarray(0, end), truncated: true };
}

/**
 * The agent's request body as bytes: `text` as UTF-8, `base64` decoded (a RangeError names the field).
 * @example requestBody('aGk=', 'base64') // Uint8Array [104, 105]
 */
export function requestBody(
  body: string | undefined,
  encoding: 'text' | 'base64',
): Uint8Array<ArrayBuffer> | undefined {
  if (body === undefined) return undefined;
  if (encoding === 'text') return new TextEncoder().encode(body);
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(body) || body.length % 4 !== 0)
    throw new RangeError('body: not base64 (bodyEncoding is "base64")');
  return new Uint8Array(Buffer.from(body, 'base64'));
}
