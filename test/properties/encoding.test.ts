/**
 * Value rules and canonical form (PROTOCOL.md §1, §2): the amount parser accepts exactly
 * `^(0|[1-9][0-9]{0,37})$`; JCS round-trips through the strict parser; the strict parser refuses
 * duplicate keys, lone surrogates and unsafe integers wherever they hide; policyHash does not
 * depend on key order.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import fc from 'fast-check';
import { createHash } from 'node:crypto';
import {
  CtlError,
  canonicalize,
  isAmount,
  parseAmount,
  parsePaymentAmount,
  parseStrictJson,
  policyHash,
} from '../../src/index.js';
import { sameCanonical } from '../../src/encoding/jcs.js';
import { params } from './fixtures.js';

const REFERENCE = /^(0|[1-9][0-9]{0,37})$/;

// ---------------------------------------------------------------------------------------------
// Amounts

/** Strings that sit next to the rule: every one differs from a valid amount in one way. */
const digits = (min: number, max: number) =>
  fc.string({ unit: fc.constantFrom(...'0123456789'), minLength: min, maxLength: max });
const nearMiss = fc.oneof(
  digits(1, 40), // includes leading zeros, 38/39/40 digits
  fc
    .tuple(
      digits(1, 3).map((d) => '0'.repeat(d.length)),
      digits(1, 5),
    )
    .map(([z, d]) => z + d), // leading zeros
  fc
    .tuple(fc.constantFrom('+', '-', ' ', '\t', '\n', '\u00a0', '\ufeff', '0x', '0b', '−', '٣', '１'), digits(1, 10))
    .map(([p, d]) => p + d),
  fc
    .tuple(
      digits(1, 10),
      fc.constantFrom(' ', '\n', '\r\n', 'e3', 'E3', 'e+3', '.0', '.', 'n', '_000', '٣', '１', '\u0000'),
    )
    .map(([d, s]) => d + s),
  fc.tuple(digits(1, 5), fc.constantFrom('e', 'E', '.', '_', ',', ' '), digits(1, 5)).map(([a, s, b]) => a + s + b),
  fc
    .integer({ min: 36, max: 41 })
    .chain((n) => fc.tuple(fc.constantFrom(...'123456789'), digits(n - 1, n - 1)).map(([a, b]) => a + b)),
  fc.constantFrom(
    '',
    '0',
    '00',
    '-0',
    '+0',
    '1e3',
    '1.0',
    ' 1',
    '1 ',
    'Infinity',
    'NaN',
    '0x10',
    '9'.repeat(38),
    '9'.repeat(39),
    '1' + '0'.repeat(37),
    '1' + '0'.repeat(38),
  ),
);

function checkAmount(s: unknown) {
  const expected = typeof s === 'string' && REFERENCE.test(s);
  if (isAmount(s) !== expected) throw new Error(`isAmount(${JSON.stringify(s)}) = ${!expected}`);
  let parsed: bigint | undefined;
  let err: unknown;
  try {
    parsed = parseAmount(s, 'amount');
  } catch (e) {
    err = e;
  }
  if (expected) {
    if (parsed !== BigInt(s as string)) throw new Error(`parseAmount(${JSON.stringify(s)}) = ${parsed}`);
  } else if (!(err instanceof CtlError) || err.code !== 'malformed' || !err.message.includes('amount')) {
    throw new Error(`parseAmount(${JSON.stringify(s)}) did not refuse with malformed naming the field: ${String(err)}`);
  }
  // A payment amount is an amount > 0.
  let pay: unknown;
  try {
    pay = parsePaymentAmount(s, 'amount');
  } catch (e) {
    pay = e;
  }
  const payOk = expected && BigInt(s as string) > 0n;
  if (payOk !== (typeof pay === 'bigint')) throw new Error(`parsePaymentAmount(${JSON.stringify(s)}) = ${String(pay)}`);
}

test('amount parser = reference regex on arbitrary strings (20000 runs)', () => {
  fc.assert(
    fc.property(
      fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.string({ unit: fc.constantFrom(...'0123456789+-eE. ') })),
      (s) => {
        checkAmount(s);
      },
    ),
    params(20000),
  );
});

test('amount parser = reference regex on near misses (20000 runs)', () => {
  fc.assert(
    fc.property(nearMiss, (s) => {
      checkAmount(s);
    }),
    params(20000),
  );
});

test('every valid amount round-trips, the largest is 38 digits; non-strings are refused (5000 runs)', () => {
  fc.assert(
    fc.property(fc.bigInt({ min: 0n, max: 10n ** 38n - 1n }), (n) => {
      if (!isAmount(n.toString()) || parseAmount(n.toString(), 'a') !== n) throw new Error(String(n));
    }),
    params(5000),
  );
  fc.assert(
    fc.property(
      fc.oneof(
        fc.integer(),
        fc.bigInt(),
        fc.double(),
        fc.boolean(),
        fc.constant(null),
        fc.object(),
        fc.array(fc.string()),
      ),
      (x) => {
        checkAmount(x);
      },
    ),
    params(2000),
  );
  assert.ok(isAmount('9'.repeat(38)));
  assert.not.ok(isAmount('1' + '0'.repeat(38)));
});

// ---------------------------------------------------------------------------------------------
// JCS and the strict parser

/** JSON documents the artifacts could carry: safe integers only, any Unicode text (paired surrogates). */
const safeJson = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    fc.integer({ min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }),
    fc.string({ unit: 'grapheme' }),
    fc.string({ unit: 'binary' }),
    fc.array(tie('value'), { maxLength: 5 }),
    fc.dictionary(fc.string({ unit: 'binary', maxLength: 6 }), tie('value'), { maxKeys: 5 }),
  ),
})).value;

/** The canonical form written independently: sort keys by UTF-16 code units, then JSON.stringify. */
function reference(v: unknown): string {
  if (Array.isArray(v)) return '[' + v.map(reference).join(',') + ']';
  if (v && typeof v === 'object') {
    const keys = Object.keys(v)
      .filter((k) => (v as any)[k] !== undefined)
      .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    return '{' + keys.map((k) => JSON.stringify(k) + ':' + reference((v as any)[k])).join(',') + '}';
  }
  return JSON.stringify(v);
}

test(
  'canonicalize(parseStrictJson(canonicalize(x))) === canonicalize(x), and equals an ' + 'independent JCS (5000 runs)',
  () => {
    fc.assert(
      fc.property(safeJson, (x) => {
        const text = canonicalize(x);
        if (canonicalize(parseStrictJson(text)) !== text) throw new Error('round trip changed the text');
        if (text !== reference(x))
          throw new Error(`canonical text differs from the reference: ${text} vs ${reference(x)}`);
        // and the same through JSON.parse of pretty-printed text (white space is not significant)
        if (canonicalize(parseStrictJson(JSON.stringify(JSON.parse(text), null, 2))) !== text)
          throw new Error('pretty round trip');
      }),
      params(5000),
    );
  },
);

/**
 * A copy of `v` that canonicalizes the same (keys shuffled, undefined members added, 0 as -0) or,
 * where `edit` picks a node, differently or not at all (a leaf changed, a member added, dropped or
 * made non-enumerable, an array as an index-keyed object, a class instance, a hole, NaN).
 */
function variant(v: unknown, edit: number, pick: () => number): unknown {
  const here = edit > 0 && pick() % 4 === 0;
  if (here) {
    switch (edit % 9) {
      case 8: {
        // a member made non-enumerable (no member for canonicalize), another added in its place
        if (!v || typeof v !== 'object' || Array.isArray(v) || !Object.keys(v).length) return { hidden: 1 };
        const copy: Record<string, unknown> = { ...(v as object) };
        const k = Object.keys(copy)[0]!;
        const x = copy[k];
        delete copy[k];
        Object.defineProperty(copy, k, { value: x, enumerable: false });
        copy[k + '\u0001'] = 0;
        return copy;
      }
      case 0:
        return typeof v === 'string' ? v + 'x' : 'x';
      case 1:
        return v && typeof v === 'object' && !Array.isArray(v) ? { ...(v as object), zz: 1 } : [v];
      case 2:
        return Array.isArray(v) ? Object.fromEntries(v.map((x, i) => [String(i), x])) : v === null ? 0 : null;
      case 3:
        return v && typeof v === 'object' && !Array.isArray(v)
          ? Object.assign(Object.create({ inherited: 1 }), v)
          : NaN;
      case 4:
        return Array.isArray(v) ? [...v, undefined] : typeof v === 'number' ? v + 1 : [];
      case 5:
        return v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length
          ? Object.fromEntries(Object.entries(v).slice(1))
          : true;
      case 6:
        return Array.isArray(v) && v.length ? new Array(v.length) : typeof v === 'boolean' ? !v : false;
      default:
        return v && typeof v === 'object' ? new Map(Object.entries(v)) : String(v);
    }
  }
  if (Array.isArray(v)) return v.map((x) => variant(x, edit, pick));
  if (v && typeof v === 'object') {
    const entries = Object.entries(v).map(([k, x]) => [k, variant(x, edit, pick)] as const);
    entries.sort(() => (pick() % 2 ? 1 : -1));
    const out: Record<string, unknown> = Object.fromEntries(entries);
    if (pick() % 3 === 0) out['\u0000absent'] = undefined; // left out by canonicalize
    return out;
  }
  return v === 0 ? -0 : v;
}

test(
  'sameCanonical(y, parsed text of x) is exactly canonicalize(y) === canonicalize(x), ' + 'on near copies (5000 runs)',
  () => {
    let equal = 0;
    let differ = 0;
    fc.assert(
      fc.property(safeJson, fc.nat(17), fc.array(fc.nat(), { minLength: 64, maxLength: 64 }), (x, edit, rolls) => {
        let r = 0;
        const y = variant(x, edit, () => rolls[r++ % rolls.length]!);
        const text = canonicalize(x);
        let expected: boolean;
        try {
          expected = canonicalize(y) === text;
        } catch {
          expected = false; // canonicalize refuses it: never a match
        }
        if (sameCanonical(y, parseStrictJson(text)) !== expected)
          throw new Error(`sameCanonical disagrees (${expected}) for ${text}`);
        if (expected) equal++;
        else differ++;
      }),
      params(5000),
    );
    // Both answers were exercised, or the property proves little.
    assert.ok(equal > 500 && differ > 500, `equal ${equal}, differ ${differ}`);
  },
);

test('numbers: any finite double round-trips with numbers: "finite" (5000 runs)', () => {
  fc.assert(
    fc.property(fc.jsonValue(), (x) => {
      const text = canonicalize(x);
      if (canonicalize(parseStrictJson(text, { numbers: 'finite' })) !== text) throw new Error(text);
    }),
    params(5000),
  );
});

type Poison =
  | 'duplicate'
  | 'lone-surrogate-escaped'
  | 'lone-surrogate-raw'
  | 'low-surrogate-first'
  | 'unsafe-integer'
  | 'fraction'
  | 'huge-exponent'
  | 'negative-unsafe';

/**
 * Canonical text of `doc` with one poison placed in its `target`-th container (objects get a
 * poisoned member, arrays a poisoned element), so the refusal can come from any depth.
 */
function poisoned(doc: unknown, target: number, poison: Poison, keyPick: number): string {
  let counter = 0;
  const poisonValue = (): string => {
    switch (poison) {
      case 'lone-surrogate-escaped':
        return '"a\\ud800b"';
      case 'lone-surrogate-raw':
        return '"a\ud800b"';
      case 'low-surrogate-first':
        return '"\\udc00\\ud800"';
      case 'unsafe-integer':
        return '9007199254740993';
      case 'negative-unsafe':
        return '-9007199254740992';
      case 'fraction':
        return '1.5';
      case 'huge-exponent':
        return '1e400';
      default:
        return '{"d":1,"d":2}';
    }
  };
  const w = (v: unknown): string => {
    if (v && typeof v === 'object') {
      const mine = counter++;
      if (Array.isArray(v)) {
        const items = v.map(w);
        if (mine === target) items.splice(keyPick % (items.length + 1), 0, poisonValue());
        return '[' + items.join(',') + ']';
      }
      const keys = Object.keys(v).sort();
      const members = keys.map((k) => JSON.stringify(k) + ':' + w((v as any)[k]));
      if (mine === target) {
        if (poison === 'duplicate' && keys.length > 0) {
          const k = keys[keyPick % keys.length]!;
          members.splice(keyPick % (members.length + 1), 0, JSON.stringify(k) + ':null');
        } else {
          members.splice(keyPick % (members.length + 1), 0, JSON.stringify('\u0000poison') + ':' + poisonValue());
        }
      }
      return '{' + members.join(',') + '}';
    }
    return canonicalize(v);
  };
  const wrapped = { doc };
  const count = (v: unknown): number =>
    v && typeof v === 'object' ? 1 + Object.values(v).reduce((a: number, x) => a + count(x), 0) : 0;
  target %= count(wrapped);
  return w(wrapped);
}

test('parseStrictJson refuses duplicate keys, lone surrogates and unsafe numbers anywhere (10000 runs)', () => {
  const poison = fc.constantFrom<Poison>(
    'duplicate',
    'lone-surrogate-escaped',
    'lone-surrogate-raw',
    'low-surrogate-first',
    'unsafe-integer',
    'fraction',
    'huge-exponent',
    'negative-unsafe',
  );
  fc.assert(
    fc.property(safeJson, fc.nat(), poison, fc.nat(), (doc, target, p, keyPick) => {
      const clean = canonicalize({ doc });
      parseStrictJson(clean); // must parse: the refusal below is the poison's doing
      const text = poisoned(doc, target, p, keyPick);
      let err: unknown;
      try {
        parseStrictJson(text);
      } catch (e) {
        err = e;
      }
      if (!(err instanceof CtlError) || err.code !== 'malformed')
        throw new Error(`${p} not refused: ${text.slice(0, 200)} (${String(err)})`);
      if (p === 'fraction' || p === 'huge-exponent' || p === 'unsafe-integer' || p === 'negative-unsafe') {
        // numbers: 'finite' takes fractions and big integers, still not non-finite ones
        let e2: unknown;
        try {
          parseStrictJson(text, { numbers: 'finite' });
        } catch (e) {
          e2 = e;
        }
        if ((p === 'huge-exponent') !== e2 instanceof CtlError) throw new Error(`finite mode on ${p}: ${String(e2)}`);
      }
    }),
    params(10000),
  );
});

test('canonicalize refuses lone surrogates in keys and values at any depth (2000 runs)', () => {
  fc.assert(
    fc.property(
      safeJson,
      fc.boolean(),
      fc.constantFrom('\ud800', '\udfff', 'a\udc00', '\ud83d'),
      (doc, asKey, lone) => {
        const bad = asKey ? { doc, [lone]: 1 } : { doc, x: [lone] };
        let err: unknown;
        try {
          canonicalize(bad);
        } catch (e) {
          err = e;
        }
        if (!(err instanceof CtlError) || err.code !== 'malformed') throw new Error('accepted a lone surrogate');
      },
    ),
    params(2000),
  );
});

// ---------------------------------------------------------------------------------------------
// policyHash

/** The same document with every object's keys inserted in a shuffled order (own data members, even "__proto__"). */
function shuffleKeys(v: unknown, rnd: () => number): unknown {
  if (Array.isArray(v)) return v.map((x) => shuffleKeys(x, rnd));
  if (v && typeof v === 'object') {
    const keys = Object.keys(v);
    for (let i = keys.length - 1; i > 0; i--) {
      const j = Math.floor(rnd() * (i + 1));
      [keys[i], keys[j]] = [keys[j]!, keys[i]!];
    }
    const out = {};
    for (const k of keys)
      Object.defineProperty(out, k, {
        value: shuffleKeys((v as any)[k], rnd),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    return out;
  }
  return v;
}

test('policyHash is stable under key order and equals hex SHA-256 of the canonical text (3000 runs)', () => {
  fc.assert(
    fc.property(
      safeJson,
      fc.infiniteStream(fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true })),
      (doc, stream) => {
        const it = stream[Symbol.iterator]();
        const rnd = () => it.next().value as number;
        const shuffled = shuffleKeys(doc, rnd);
        const h = policyHash(doc);
        if (policyHash(shuffled) !== h) throw new Error('key order changed the hash');
        const expected = createHash('sha256').update(canonicalize(doc), 'utf8').digest('hex');
        if (h !== expected) throw new Error('not SHA-256 of the canonical text');
        if (policyHash(parseStrictJson(JSON.stringify(shuffled))) !== h) throw new Error('hash changed through text');
      },
    ),
    params(3000),
  );
});

test.run();
