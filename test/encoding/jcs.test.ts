import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readdirSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { vectorsDir, readVector } from '../helpers/vectors.js';
import { canonicalize, parseStrictJson, policyHash, CtlError } from '../../src/index.js';
import { sameCanonical } from '../../src/encoding/jcs.js';

const names = readdirSync(join(vectorsDir, 'jcs', 'input')).filter((n) => n.endsWith('.json'));

test('reads the 6 RFC 8785 vector files', () => {
  assert.ok(names.length >= 6, `found ${names.length}`);
});

for (const name of names) {
  test(`RFC 8785 vector ${name} reproduces byte for byte`, () => {
    const input = parseStrictJson(readVector(`jcs/input/${name}`), { numbers: 'finite' });
    const expected = readVector(`jcs/output/${name}`);
    assert.is(canonicalize(input), expected);
    // outhex is the same output as UTF-8 hex: check the bytes, not just the string.
    const hex = readVector(`jcs/outhex/${name.replace('.json', '.txt')}`).replace(/\s+/g, '');
    assert.is(Buffer.from(canonicalize(input), 'utf8').toString('hex'), hex.toLowerCase());
  });
}

function refuses(text: string, why: string, opts?: Parameters<typeof parseStrictJson>[1]) {
  try {
    parseStrictJson(text, opts);
  } catch (e) {
    assert.instance(e, CtlError, why);
    assert.is((e as CtlError).code, 'malformed', why);
    return;
  }
  assert.unreachable(`accepted ${why}: ${text}`);
}

test('strict parser refuses what I-JSON forbids', () => {
  refuses('{"a":1,"a":2}', 'duplicate key');
  refuses('{"a":{"b":1,"b":1}}', 'nested duplicate key');
  refuses('{"\\u0061":1,"a":2}', 'duplicate key spelled with an escape');
  refuses('"\\ud800"', 'escaped lone high surrogate');
  refuses('"\\udc00x"', 'escaped lone low surrogate');
  refuses('"\ud800"', 'raw lone surrogate');
  refuses('9007199254740993', 'unsafe integer');
  refuses('1.5', 'fraction under the integer rule');
  refuses('1e400', 'non-finite', { numbers: 'finite' });
  refuses('NaN', 'NaN');
  refuses('01', 'leading zero');
  refuses('{"a":1,}', 'trailing comma');
  refuses('{"a":1} x', 'trailing text');
  refuses('"a\u0001"', 'raw control character');
  refuses('['.repeat(100) + ']'.repeat(100), 'nesting over 64');
  refuses('', 'empty text');
});

test('strict parser accepts I-JSON and keeps __proto__ as an own member', () => {
  const v = parseStrictJson('{"__proto__":{"polluted":1},"b":[true,null,-0,"\\ud83d\\ude00"]}') as any;
  assert.is(({} as any).polluted, undefined);
  assert.ok(Object.prototype.hasOwnProperty.call(v, '__proto__'));
  assert.is(canonicalize(v), '{"__proto__":{"polluted":1},"b":[true,null,0,"😀"]}');
});

test('canonicalize refuses what JSON cannot carry', () => {
  for (const bad of [NaN, Infinity, () => 1, Symbol('x'), 1n, new Date(0), '\ud800']) {
    assert.throws(
      () => canonicalize(bad as unknown),
      (e: unknown) => e instanceof CtlError && e.code === 'malformed',
    );
  }
});

test('policyHash is SHA-256 of the canonical text', () => {
  const doc = { b: '2', a: { d: [1, 2], c: 'é' } };
  const expected = sha256Hex(canonicalize(doc));
  assert.is(policyHash(doc), expected);
  assert.is(policyHash({ a: { c: 'é', d: [1, 2] }, b: '2' }), expected);
});

function sha256Hex(text: string) {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

test(
  'sameCanonical: only what canonicalize writes is a member (non-enumerable, inherited ' +
    '__proto__, a getter read once)',
  () => {
    const known = parseStrictJson('{"a":1}');
    const hidden = { zzz: 5 };
    Object.defineProperty(hidden, 'a', { value: 1, enumerable: false });
    assert.is(canonicalize(hidden), '{"zzz":5}');
    assert.is(sameCanonical(hidden, known), false, 'a non-enumerable member is none');
    // parseStrictJson keeps __proto__ as an own member; a value without it only inherits one.
    const withProto = parseStrictJson('{"__proto__":{},"a":1}');
    assert.is(sameCanonical(JSON.parse('{"a":1,"zzz":2}'), withProto), false);
    assert.is(sameCanonical(parseStrictJson('{"__proto__":{},"a":1}'), withProto), true);
    // A getter that answers differently on a second read is read once.
    let reads = 0;
    const flaky = {
      get a() {
        return reads++ === 0 ? 1 : 2;
      },
    };
    assert.is(sameCanonical(flaky, known), true);
    assert.is(reads, 1);
    assert.is(
      sameCanonical({ a: 1, b: undefined }, known),
      true,
      'an undefined member is left out, as canonicalize does',
    );
    assert.is(sameCanonical({ a: -0 }, known), false);
    assert.is(sameCanonical({ a: -0 }, parseStrictJson('{"a":0}')), true, '-0 writes 0');
  },
);

test.run();
