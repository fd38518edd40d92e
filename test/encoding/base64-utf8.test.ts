import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import {
  base64urlEncode,
  base64urlDecode,
  base64Encode,
  base64DecodeLenient,
  utf8Encode,
  utf8Decode,
  hexEncode,
  hexDecode,
  CtlError,
} from '../../src/index.js';

const isMalformed = (e: unknown) => e instanceof CtlError && e.code === 'malformed';

test('base64url round-trips and matches Node for every length 0..64', () => {
  for (let n = 0; n <= 64; n++) {
    const bytes = new Uint8Array(randomBytes(n));
    const text = base64urlEncode(bytes);
    assert.is(text, Buffer.from(bytes).toString('base64url'));
    assert.equal(base64urlDecode(text), bytes);
    assert.is(base64Encode(bytes), Buffer.from(bytes).toString('base64'));
    assert.equal(base64DecodeLenient(base64Encode(bytes)), bytes);
  }
});

test('base64url decoder is strict (PROTOCOL.md §1)', () => {
  for (const bad of ['AQ==', 'A+8', 'A/8', 'AQ ', ' AQ', 'A', 'AR', 'AB\n', '-_9', 'é']) {
    assert.throws(() => base64urlDecode(bad), isMalformed, bad);
  }
  assert.equal(base64urlDecode('-_8'), new Uint8Array([251, 255]));
});

test('lenient decoder (HTTP presentation) takes padded base64 and base64url, not a mix', () => {
  assert.equal(base64DecodeLenient('+/8='), new Uint8Array([251, 255]));
  assert.equal(base64DecodeLenient('-_8'), new Uint8Array([251, 255]));
  for (const bad of ['+_8=', 'AQ=', 'AQ===', 'A=Q=']) assert.throws(() => base64DecodeLenient(bad), isMalformed, bad);
});

test('UTF-8 matches TextEncoder on BMP, astral and control text', () => {
  const samples = [
    '',
    'ascii',
    'Ökö – ⚡',
    '地域東京',
    '😀 astral',
    '\u0000\u007f\u0080\u07ff\u0800\uffff',
    '\ue000\ufb00',
  ];
  for (const s of samples) {
    const bytes = utf8Encode(s);
    assert.equal(bytes, new TextEncoder().encode(s), s);
    assert.is(utf8Decode(bytes), s);
  }
});

test('UTF-8 refuses lone surrogates and invalid byte sequences', () => {
  assert.throws(() => utf8Encode('a\ud800b'), isMalformed);
  assert.throws(() => utf8Encode('\udc00'), isMalformed);
  const bad = [
    [0x80],
    [0xc0, 0x80],
    [0xe0, 0x80, 0x80],
    [0xed, 0xa0, 0x80],
    [0xf4, 0x90, 0x80, 0x80],
    [0xe2, 0x82],
    [0xff],
  ];
  for (const b of bad) assert.throws(() => utf8Decode(Uint8Array.from(b)), isMalformed, JSON.stringify(b));
});

test('hex round-trips and refuses odd or non-hex input', () => {
  const bytes = new Uint8Array(randomBytes(33));
  assert.equal(hexDecode(hexEncode(bytes)), bytes);
  assert.is(hexEncode(bytes), Buffer.from(bytes).toString('hex'));
  for (const bad of ['a', 'zz', '0x00']) assert.throws(() => hexDecode(bad), isMalformed, bad);
});

test.run();
