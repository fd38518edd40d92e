/**
 * RFC 8785 (JCS) canonical JSON and a strict I-JSON parser for untrusted input (PROTOCOL.md §2).
 * `JSON.parse` silently keeps the last of duplicate keys and accepts lone surrogates, which would
 * let two parties hash different documents from the same bytes; this parser refuses both.
 */
import { CtlError, malformed } from '../errors.js';

const MAX_DEPTH = 64;
/** Own and enumerable: a member as Object.keys, and so canonicalize, has it. */
export const isEnumerable = {}.propertyIsEnumerable;

/**
 * Canonical text of a JSON value: keys sorted by UTF-16 code units, no white space, numbers in
 * ECMAScript form (RFC 8785 §3.2.2.3). Throws `CtlError('malformed')` for what JSON cannot carry.
 * @example canonicalize({ b: 1, a: [true, 'x'] }) // '{"a":[true,"x"],"b":1}'
 */
export function canonicalize(value: unknown): string {
  return write(value, 0);
}

/**
 * `canonicalize(value)` without the sort, for an object checked to be closed (its own enumerable
 * members among `keys`, PROTOCOL.md §3: an SBA's authorization), `keys` plain names (no escapes)
 * sorted as RFC 8785 §3.2.3 sorts them: the members present, in that order.
 * @example canonicalizeKnown({ b: 1, a: 'x' }, ['a', 'b']) // '{"a":"x","b":1}'
 */
export const canonicalizeKnown = (value: object, keys: readonly string[]): string => write(value, 0, keys);

function write(value: unknown, depth: number, keys?: readonly string[]): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) malformed('non-finite number');
      // ECMAScript Number-to-String is exactly RFC 8785's number form; -0 prints as 0.
      return String(value);
    case 'string':
      return quoteJson(value);
    case 'object': {
      if (depth >= MAX_DEPTH) malformed('nesting too deep');
      if (Array.isArray(value)) {
        let out = '[';
        for (let i = 0; i < value.length; i++) out += (i ? ',' : '') + write(value[i], depth + 1);
        return out + ']';
      }
      if (!isPlainObject(value)) malformed('not a plain JSON object');
      let out = '';
      for (const k of keys ?? Object.keys(value).sort()) {
        // A name given ahead is a member only if own and enumerable, as Object.keys has them.
        const v = keys && !isEnumerable.call(value, k) ? undefined : value[k];
        if (v === undefined) continue; // as JSON.stringify: an absent optional member
        out += (out ? ',' : '') + (keys ? '"' + k + '"' : quoteJson(k)) + ':' + write(v, depth + 1);
      }
      return '{' + out + '}';
    }
    default:
      malformed(`cannot canonicalize a ${typeof value}`);
  }
}

/**
 * Whether `value` canonicalizes to the text `known` was parsed from (`known`: plain JSON data, as
 * `parseStrictJson` returns it), without writing the text: equal by value is equal by bytes, so a
 * verifier can match a grant to one it has checked (PROTOCOL.md §12) for a fraction of a
 * `canonicalize`. The walk goes no deeper or wider than `known` (it stops at the first member
 * `known` lacks), so a hostile `value` cannot make it long, and what `canonicalize` refuses (a class
 * instance, a hole, a non-finite number) never matches.
 * @example sameCanonical({ b: [1], a: 'x', c: undefined }, parseStrictJson('{"a":"x","b":[1]}')) // true
 */
export function sameCanonical(value: unknown, known: unknown): boolean {
  if (typeof known !== 'object' || known === null) return value === known; // -0 === 0: both write "0"
  if (Array.isArray(known)) {
    if (!Array.isArray(value) || value.length !== known.length) return false;
    for (let i = 0; i < known.length; i++) if (!sameCanonical(value[i], known[i])) return false;
    return true;
  }
  if (!isPlainObject(value)) return false;
  // The members canonicalize writes (own, enumerable, not undefined), each read once, each an own
  // member of `known`: a non-enumerable or inherited property is no member here, as there.
  let n = 0;
  for (const k of Object.keys(value)) {
    const v = value[k];
    if (v === undefined) continue;
    if (!Object.prototype.hasOwnProperty.call(known, k) || !sameCanonical(v, (known as Record<string, unknown>)[k]))
      return false;
    n++;
  }
  return n === Object.keys(known).length;
}

/**
 * A JSON object as data: not an array, prototype Object.prototype or null (no class instance, no Map). @example
 * isPlainObject({}) // true
 */
export function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const p = Object.getPrototypeOf(v);
  return p === Object.prototype || p === null;
}

// A high surrogate not followed by a low one, or a low one not preceded by a high one (I-JSON, RFC 7493 §2.1).
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
// Printable ASCII but `"` and `\`: written as is (ids, amounts, timestamps, base64url: nearly every string of an
// artifact).
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/** A JSON string literal as RFC 8785 §3.2.2.2 writes it. @example quoteJson('a"b') // '"a\\"b"' */
export function quoteJson(s: string): string {
  if (PLAIN.test(s)) return '"' + s + '"'; // what JSON.stringify gives, twice as fast (the verifier's hot path)
  // JSON.stringify escapes exactly as RFC 8785 asks, but would escape a lone surrogate instead
  // of refusing it: I-JSON forbids them.
  if (LONE_SURROGATE.test(s)) malformed('lone surrogate');
  return JSON.stringify(s);
}

export interface StrictJsonOptions {
  /** `safe-integers` (default, the artifact rule) or `finite` (any finite number, as RFC 8785 formats). */
  numbers?: 'safe-integers' | 'finite';
  /** Refuse text longer than this many characters (default 1 MiB). */
  maxLength?: number;
}

// One token, after JSON white space: a string (JSON's escapes, no raw control character), a
// number (JSON's grammar), a literal or a punctuator. JSON.parse and Number then read string and
// number tokens, so their values are exactly JSON's; this parser adds what JSON.parse lets pass.
const STRING_TOKEN = '"[^"\\\\\\x00-\\x1f]*(?:\\\\(?:["\\\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\\\\x00-\\x1f]*)*"';
const NUMBER_TOKEN = '-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?';
const TOKEN = new RegExp(
  '[ \\t\\n\\r]*(' + [STRING_TOKEN, NUMBER_TOKEN, 'true|false|null', '[{}[\\]:,]'].join('|') + ')',
  'y',
);
const WS = /^[ \t\n\r]*$/;

/**
 * Parses untrusted JSON text as I-JSON: duplicate keys, lone surrogates, unsafe or non-finite
 * numbers, nesting over 64 levels and trailing text are refused with `CtlError('malformed')`.
 * @example parseStrictJson('{"a":1,"a":2}') // throws CtlError malformed
 */
export function parseStrictJson(text: string, options: StrictJsonOptions = {}): unknown {
  if (typeof text !== 'string') malformed('JSON text must be a string');
  if (text.length > (options.maxLength ?? 1 << 20)) malformed('JSON text too long');
  const safe = options.numbers !== 'finite';
  let at = 0;
  const fail = (why: string): never => malformed(`invalid JSON at ${at}: ${why}`);
  const next = (): string => {
    TOKEN.lastIndex = at;
    const m = TOKEN.exec(text) ?? fail(WS.test(text.slice(at)) ? 'unexpected end' : 'unexpected character');
    at = TOKEN.lastIndex;
    return m[1]!;
  };
  const string = (t: string): string => {
    const v = t.includes('\\') ? (JSON.parse(t) as string) : t.slice(1, -1);
    // Surrogates may arrive raw or as escapes; either way they must pair up.
    return LONE_SURROGATE.test(v) ? fail('lone surrogate') : v;
  };
  const value = (t: string, depth: number): unknown => {
    if (depth > MAX_DEPTH) fail('nesting too deep');
    if (t === '{' || t === '[') {
      const object = t === '{';
      const out: Record<string, unknown> | unknown[] = object ? {} : [];
      const close = object ? '}' : ']';
      let u = next();
      if (u === close) return out;
      for (;;) {
        if (object) {
          if (u[0] !== '"') fail('expected a key');
          const key = string(u);
          if (Object.prototype.hasOwnProperty.call(out, key)) fail(`duplicate key ${JSON.stringify(key)}`);
          if (next() !== ':') fail("expected ':'");
          // An own data property even for "__proto__": never touch the prototype chain.
          Object.defineProperty(out, key, {
            value: value(next(), depth + 1),
            enumerable: true,
            writable: true,
            configurable: true,
          });
        } else (out as unknown[]).push(value(u, depth + 1));
        u = next();
        if (u === close) return out;
        if (u !== ',') fail(`expected ',' or '${close}'`);
        u = next();
      }
    }
    if (t[0] === '"') return string(t);
    if (t === 'true' || t === 'false') return t === 'true';
    if (t === 'null') return null;
    if (/^[-0-9]/.test(t)) {
      const n = Number(t);
      if (!Number.isFinite(n)) fail('number out of range');
      if (safe && !Number.isSafeInteger(n)) fail('number is not a safe integer');
      return n;
    }
    return fail(`unexpected '${t}'`);
  };
  const v = value(next(), 0);
  if (!WS.test(text.slice(at))) fail('unexpected trailing text');
  return v;
}
