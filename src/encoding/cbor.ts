/**
 * Deterministic CBOR (RFC 8949 §4.2.1) over the JSON model of the artifacts plus byte strings,
 * for the compact form (PROTOCOL.md §6) and the firmware bridge frames. The only file that
 * imports cbor-x (ARCHITECTURE.md rule 4).
 *
 * cbor-x is pinned down rather than trusted with defaults, because it changes behaviour with the
 * host: where Node buffers exist it tags Uint8Array (tag 64) and returns Node buffers, and its encoder
 * hands back a view into a buffer it reuses. So: every option that changes bytes is set here,
 * map keys are sorted here (length first, then bytewise: the order of the encoded keys that
 * §4.2.1 asks for; JS objects would put "0".."9" keys first), and outputs are copied into plain
 * Uint8Arrays. Decoding is strict: only the model below, and the input must re-encode to exactly
 * the same bytes, which refuses every non-canonical form (long integer heads, indefinite lengths,
 * unsorted or duplicate keys, floats, tags, trailing bytes) with one rule.
 */
import { Encoder } from 'cbor-x/encode';
import { CtlError, malformed } from '../errors.js';
import { utf8Encode } from './utf8.js';

/** The values a CBOR item may hold here: JSON without floats, plus byte strings. */
export type CborValue = null | boolean | number | string | Uint8Array | CborValue[] | { [key: string]: CborValue };

/** Largest input `cborDecode` accepts (a Trust Bundle with many keys still fits well). */
export const MAX_CBOR_BYTES = 1 << 20;
const MAX_DEPTH = 32;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

// Every option that changes the bytes, fixed (cbor-x 1.6 names).
const codec = new Encoder({
  useRecords: false, // no cbor-x record extension (tag 105 …)
  mapsAsObjects: false, // decode maps as Map: keys are checked here, `__proto__` is just a key
  useTag259ForMaps: false,
  variableMapSize: true,
  tagUint8Array: false, // no tag 64 for bytes where Node buffers exist
  copyBuffers: true, // decoded bytes never alias the input
  useFloat32: 0, // NEVER: floats are refused anyway
  alwaysUseFloat: false,
  largeBigIntToFloat: false,
  structuredClone: false,
  bundleStrings: false,
  pack: false,
  useTimestamp32: false,
  useSelfDescribedHeader: false,
  encodeUndefinedAsNil: false,
} as ConstructorParameters<typeof Encoder>[0] & Record<string, unknown>);

const byteLengthOrder = (a: [Uint8Array, string], b: [Uint8Array, string]): number => {
  if (a[0].length !== b[0].length) return a[0].length - b[0].length;
  for (let i = 0; i < a[0].length; i++) if (a[0][i] !== b[0][i]) return a[0][i]! - b[0][i]!;
  return 0;
};

/** Plain objects → Maps in deterministic key order; validates the model on the way. */
function toEncodable(value: unknown, depth: number): unknown {
  if (depth > MAX_DEPTH) malformed('CBOR: nesting deeper than 32');
  if (value === null || typeof value === 'boolean') return value;
  if (typeof value === 'string') {
    // cbor-x's fallback encoder (no TextEncoder, e.g. QuickJS) would write a lone surrogate as-is.
    if (LONE_SURROGATE.test(value)) malformed('CBOR: lone surrogate in text');
    return value;
  }
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value)) malformed('CBOR: only safe integers are encoded (money is a string)');
    return value;
  }
  if (value instanceof Uint8Array) return value;
  if (Array.isArray(value)) return value.map((v) => toEncodable(v, depth + 1));
  if (typeof value === 'object') {
    const keys = Object.keys(value as object).map((k) => [utf8Encode(k), k] as [Uint8Array, string]);
    keys.sort(byteLengthOrder);
    const map = new Map<string, unknown>();
    for (const [, k] of keys) {
      const v = (value as Record<string, unknown>)[k];
      if (v === undefined) malformed(`CBOR: member ${k} is undefined`);
      map.set(k, toEncodable(v, depth + 1));
    }
    return map;
  }
  malformed(`CBOR: a ${typeof value} cannot be encoded`);
}

/** Decoded cbor-x values → the model, or throw. */
function fromDecoded(value: unknown, depth: number): CborValue {
  if (depth > MAX_DEPTH) malformed('CBOR: nesting deeper than 32');
  if (value === null || typeof value === 'boolean' || typeof value === 'string') return value;
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value)) malformed('CBOR: only safe integers are allowed');
    return value;
  }
  if (value instanceof Uint8Array) return new Uint8Array(value); // a Node buffer in Node: a plain copy
  if (Array.isArray(value)) return value.map((v) => fromDecoded(v, depth + 1));
  if (value instanceof Map) {
    const out: Record<string, CborValue> = {};
    for (const [k, v] of value) {
      if (typeof k !== 'string') malformed('CBOR: map keys must be text strings');
      // defineProperty: a "__proto__" key stays a plain member.
      Object.defineProperty(out, k, {
        value: fromDecoded(v, depth + 1),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out;
  }
  malformed('CBOR: tags, floats, undefined and simple values are not allowed');
}

/**
 * Deterministic CBOR of `value` (RFC 8949 §4.2.1). Throws `CtlError('malformed')` outside the model.
 * @example cborEncode({ b: 1, a: [true, 'x'] }) // Uint8Array a2 61 61 82 f5 61 78 61 62 01
 */
export function cborEncode(value: unknown): Uint8Array {
  const encodable = toEncodable(value, 0);
  const out = codec.encode(encodable) as Uint8Array;
  // A plain Uint8Array copy: cbor-x reuses its buffer, and in Node it is a Node buffer (whose slice
  // would be a Node buffer again, and a view).
  return new Uint8Array(out);
}

/**
 * Decodes one deterministic CBOR item, refusing anything non-canonical or outside the model.
 * @example cborDecode(cborEncode({ a: 1 })) // { a: 1 }
 */
export function cborDecode(bytes: Uint8Array): CborValue {
  if (!(bytes instanceof Uint8Array)) throw new TypeError('cborDecode(bytes): bytes must be a Uint8Array');
  if (bytes.length === 0) malformed('CBOR: empty input');
  if (bytes.length > MAX_CBOR_BYTES) malformed(`CBOR: more than ${MAX_CBOR_BYTES} bytes`);
  let decoded: unknown;
  try {
    decoded = codec.decode(bytes);
  } catch (e) {
    malformed(`CBOR: ${e instanceof Error ? e.message : 'undecodable'}`);
  }
  const value = fromDecoded(decoded, 0);
  const again = cborEncode(value);
  if (again.length !== bytes.length || again.some((b, i) => b !== bytes[i])) {
    malformed('CBOR: not in deterministic encoding (RFC 8949 §4.2.1)');
  }
  return value;
}
