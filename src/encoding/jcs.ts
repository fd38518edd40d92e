/**
 * RFC 8785 (JCS) canonical JSON and a strict I-JSON parser for untrusted input (PROTOCOL.md §2).
 * `JSON.parse` silently keeps the last of duplicate keys and accepts lone surrogates, which would
 * let two parties hash different documents from the same bytes; this parser refuses both.
 */
import { CtlError, malformed } from '../errors.js';

const MAX_DEPTH = 64;

/**
 * Canonical text of a JSON value: keys sorted by UTF-16 code units, no white space, numbers in
 * ECMAScript form (RFC 8785 §3.2.2.3). Throws `CtlError('malformed')` for what JSON cannot carry.
 * @example canonicalize({ b: 1, a: [true, 'x'] }) // '{"a":[true,"x"],"b":1}'
 */
export function canonicalize(value: unknown, maxLength = Infinity): string {
  return write(value, 0, maxLength);
}

/**
 * `max` bounds the text as it grows, so an object graph that shares one child many times (a few
 * objects, an exponential text) is refused instead of exhausting memory.
 */
function write(value: unknown, depth: number, max: number): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) malformed('non-finite number');
      // ECMAScript Number-to-String is exactly RFC 8785's number form; -0 prints as 0.
      return String(value);
    case 'string':
      if (value.length > max) malformed('text too long');
      return quoteJson(value);
    case 'object': {
      if (depth >= MAX_DEPTH) malformed('nesting too deep');
      if (Array.isArray(value)) {
        let out = '[';
        for (let i = 0; i < value.length; i++) {
          out += (i ? ',' : '') + write(value[i], depth + 1, max);
          if (out.length > max) malformed('text too long');
        }
        return out + ']';
      }
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) malformed('not a plain JSON object');
      const keys = Object.keys(value as object).sort();
      let out = '{';
      let first = true;
      for (const k of keys) {
        const v = (value as Record<string, unknown>)[k];
        if (v === undefined) continue; // as JSON.stringify: an absent optional member
        out += (first ? '' : ',') + quoteJson(k) + ':' + write(v, depth + 1, max);
        if (out.length > max) malformed('text too long');
        first = false;
      }
      return out + '}';
    }
    default:
      malformed(`cannot canonicalize a ${typeof value}`);
  }
}

const SURROGATE = /[\ud800-\udfff]/;
// Printable ASCII but `"` and `\`: written as is (ids, amounts, timestamps, base64url: nearly every string of an artifact).
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/** A JSON string literal as RFC 8785 §3.2.2.2 writes it. @example quoteJson('a"b') // '"a\\"b"' */
export function quoteJson(s: string): string {
  if (PLAIN.test(s)) return '"' + s + '"'; // what JSON.stringify gives, twice as fast (the verifier's hot path)
  // JSON.stringify escapes exactly as RFC 8785 asks, but would escape a lone surrogate instead
  // of refusing it: I-JSON forbids them. The regex keeps the common case native-fast.
  if (SURROGATE.test(s)) {
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0xd800 && c <= 0xdfff) {
        const d = s.charCodeAt(i + 1);
        if (c > 0xdbff || !(d >= 0xdc00 && d <= 0xdfff)) malformed('lone surrogate');
        i++;
      }
    }
  }
  return JSON.stringify(s);
}

export interface StrictJsonOptions {
  /** `safe-integers` (default, the artifact rule) or `finite` (any finite number, as RFC 8785 formats). */
  numbers?: 'safe-integers' | 'finite';
  /** Refuse text longer than this many characters (default 1 MiB). */
  maxLength?: number;
}

/**
 * Parses untrusted JSON text as I-JSON: duplicate keys, lone surrogates, unsafe or non-finite
 * numbers, nesting over 64 levels and trailing text are refused with `CtlError('malformed')`.
 * @example parseStrictJson('{"a":1,"a":2}') // throws CtlError malformed
 */
export function parseStrictJson(text: string, options: StrictJsonOptions = {}): unknown {
  if (typeof text !== 'string') malformed('JSON text must be a string');
  if (text.length > (options.maxLength ?? 1 << 20)) malformed('JSON text too long');
  const p = new Parser(text, options.numbers ?? 'safe-integers');
  p.ws();
  const value = p.value(0);
  p.ws();
  if (p.i !== text.length) p.fail('unexpected trailing text');
  return value;
}

class Parser {
  i = 0;
  constructor(readonly s: string, readonly numbers: 'safe-integers' | 'finite') {}

  fail(why: string): never {
    malformed(`invalid JSON at ${this.i}: ${why}`);
  }

  ws(): void {
    const s = this.s;
    while (this.i < s.length) {
      const c = s.charCodeAt(this.i);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) this.i++;
      else break;
    }
  }

  value(depth: number): unknown {
    if (depth > MAX_DEPTH) this.fail('nesting too deep');
    const c = this.s[this.i];
    if (c === '{') return this.object(depth);
    if (c === '[') return this.array(depth);
    if (c === '"') return this.string();
    if (c === 't') return this.literal('true', true);
    if (c === 'f') return this.literal('false', false);
    if (c === 'n') return this.literal('null', null);
    if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) return this.number();
    return this.fail(c === undefined ? 'unexpected end' : `unexpected '${c}'`);
  }

  literal<T>(word: string, v: T): T {
    if (this.s.startsWith(word, this.i)) {
      this.i += word.length;
      return v;
    }
    return this.fail('invalid literal');
  }

  object(depth: number): Record<string, unknown> {
    this.i++;
    const out: Record<string, unknown> = {};
    const seen = new Set<string>();
    this.ws();
    if (this.s[this.i] === '}') {
      this.i++;
      return out;
    }
    for (;;) {
      this.ws();
      if (this.s[this.i] !== '"') this.fail('expected a key');
      const key = this.string();
      if (seen.has(key)) this.fail(`duplicate key ${JSON.stringify(key)}`);
      seen.add(key);
      this.ws();
      if (this.s[this.i] !== ':') this.fail("expected ':'");
      this.i++;
      this.ws();
      const v = this.value(depth + 1);
      // An own data property even for "__proto__": never touch the prototype chain.
      Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true });
      this.ws();
      const c = this.s[this.i++];
      if (c === '}') return out;
      if (c !== ',') this.fail("expected ',' or '}'");
    }
  }

  array(depth: number): unknown[] {
    this.i++;
    const out: unknown[] = [];
    this.ws();
    if (this.s[this.i] === ']') {
      this.i++;
      return out;
    }
    for (;;) {
      this.ws();
      out.push(this.value(depth + 1));
      this.ws();
      const c = this.s[this.i++];
      if (c === ']') return out;
      if (c !== ',') this.fail("expected ',' or ']'");
    }
  }

  string(): string {
    const s = this.s;
    let i = ++this.i;
    let out = '';
    let start = i;
    for (;;) {
      if (i >= s.length) { this.i = i; this.fail('unterminated string'); }
      const c = s.charCodeAt(i);
      if (c === 0x22) break;
      if (c < 0x20) { this.i = i; this.fail('control character in string'); }
      if (c === 0x5c) {
        out += s.slice(start, i);
        const e = s[i + 1];
        i += 2;
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': {
            const hex = s.slice(i, i + 4);
            if (!/^[0-9a-fA-F]{4}$/.test(hex)) { this.i = i; this.fail('bad \\u escape'); }
            out += String.fromCharCode(parseInt(hex, 16));
            i += 4;
            break;
          }
          default:
            this.i = i;
            this.fail('bad escape');
        }
        start = i;
        continue;
      }
      i++;
    }
    out += s.slice(start, i);
    this.i = i + 1;
    // Surrogates may arrive raw or as escapes; either way they must pair up (I-JSON, RFC 7493 §2.1).
    for (let k = 0; k < out.length; k++) {
      const c = out.charCodeAt(k);
      if (c >= 0xd800 && c <= 0xdfff) {
        const d = out.charCodeAt(k + 1);
        if (c > 0xdbff || !(d >= 0xdc00 && d <= 0xdfff)) this.fail('lone surrogate');
        k++;
      }
    }
    return out;
  }

  number(): number {
    const m = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/.exec(this.s.slice(this.i, this.i + 400));
    if (!m) return this.fail('invalid number');
    this.i += m[0].length;
    const n = Number(m[0]);
    if (!Number.isFinite(n)) this.fail('number out of range');
    if (this.numbers === 'safe-integers' && !Number.isSafeInteger(n)) this.fail('number is not a safe integer');
    return n;
  }
}
