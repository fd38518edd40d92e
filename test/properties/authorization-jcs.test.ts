/**
 * An SBA's signed text writes its authorization with `canonicalizeKnown` (its member names known
 * ahead, PROTOCOL.md §4, so no sort): on any authorization, present members in any order and any
 * text in its strings (escapes, controls, non-ASCII, astral, lone surrogates), the text must be
 * exactly `canonicalize`'s, or both refuse it (PROTOCOL.md §2, §3).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import fc from 'fast-check';
import { canonicalize, canonicalizeKnown } from '../../src/encoding/jcs.js';
import { sbaSignedText } from '../../src/artifacts/sba.js';
import { signedBytes, utf8Encode } from '../../src/index.js';
import { params } from './fixtures.js';

const MEMBERS = [
  'budgetId',
  'sessionId',
  'actorId',
  'grantId',
  'policyHash',
  'currency',
  'maxAmountMinor',
  'allowedRails',
  'allowedAssets',
  'destinationAllowlist',
  'budgetScope',
  'issuedAt',
  'expiresAt',
  'rail',
  'merchantId',
  'purpose',
  'intentHash',
];
const ARRAYS = new Set(['allowedRails', 'allowedAssets', 'destinationAllowlist']);

/** Text that needs JCS's escapes or is not ASCII, mixed with plain identifiers. */
const text = fc.oneof(
  fc.string({
    unit: fc.constantFrom(
      '"',
      '\\',
      '\n',
      '\r',
      '\t',
      '\b',
      '\f',
      '\u0000',
      '\u001f',
      '\u007f',
      'é',
      '€',
      '😀',
      '\u2028',
      '/',
      'a',
      'Z',
      '0',
      '-',
      ':',
    ),
  }),
  fc.string({ unit: 'grapheme' }),
  fc.string({ unit: 'binary' }), // any code point, lone surrogates among them
  fc.stringMatching(/^[A-Za-z0-9._:-]{1,40}$/),
);
const member = (name: string) =>
  ARRAYS.has(name)
    ? name === 'allowedAssets'
      ? fc.array(fc.record({ standard: text, code: text }), { maxLength: 3 })
      : fc.array(text, { maxLength: 3 })
    : text;

/** Any subset of the members, present in a random order (as a caller's object may hold them). */
const authorization = fc
  .subarray(MEMBERS)
  .chain((names) =>
    fc.tuple(
      fc.constant(names),
      fc.shuffledSubarray(names, { minLength: names.length }),
      fc.tuple(...names.map(member)),
    ),
  )
  .map(([names, order, values]) => {
    const byName = new Map(names.map((n, i) => [n, values[i]]));
    const a: Record<string, unknown> = {};
    for (const n of order) a[n] = byName.get(n);
    return a;
  });

const outcome = (f: () => string): string => {
  try {
    return 'text ' + f();
  } catch (e) {
    return 'refused ' + (e as { code?: string }).code;
  }
};

const SORTED = [...MEMBERS].sort();

test('canonicalizeKnown = canonicalize on random authorizations, escapes and non-ASCII included (20000 runs)', () => {
  fc.assert(
    fc.property(authorization, (a) => {
      const known = outcome(() => canonicalizeKnown(a, SORTED));
      const general = outcome(() => canonicalize(a));
      if (known !== general) throw new Error(`${known}\n≠ ${general}`);
    }),
    params(20000),
  );
});

test('sbaSignedText as UTF-8 = signedBytes("sba") on random authorizations (5000 runs)', () => {
  const grant = { version: 1, grantId: 'g', note: 'é"\\' };
  fc.assert(
    fc.property(authorization, fc.option(text, { nil: undefined }), text, (a, issuer, keyId) => {
      const sba: Record<string, unknown> = { version: 1, authorization: a, grant, keyId, signature: 'x' };
      if (issuer !== undefined) sba['issuer'] = issuer;
      const fast = outcome(() => Array.from(utf8Encode(sbaSignedText(sba as never, canonicalize(grant)))).join());
      const full = outcome(() => Array.from(signedBytes('sba', sba)).join());
      if (fast !== full) throw new Error(`${fast}\n≠ ${full}`);
    }),
    params(5000),
  );
});

test('canonicalizeKnown writes only own enumerable members, as canonicalize does', () => {
  const a: Record<string, unknown> = { actorId: 'x', merchantId: undefined };
  Object.defineProperty(a, 'purpose', { value: 'hidden', enumerable: false });
  const polluted = Object.prototype as Record<string, unknown>;
  polluted['sessionId'] = 'from the prototype';
  try {
    assert.is(canonicalizeKnown(a, SORTED), canonicalize(a));
    assert.is(canonicalizeKnown(a, SORTED), '{"actorId":"x"}');
  } finally {
    delete polluted['sessionId'];
  }
});

test.run();
