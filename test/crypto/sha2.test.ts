// The pure-JS SHA-2 of the device bundles (src/crypto/sha2.ts) against the FIPS 180-4 / NIST
// example vectors and against node:crypto on every length across several block boundaries.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as nodeCrypto from 'node:crypto';
import { hmacSha256, sha256, sha512 } from '../../src/crypto/sha2.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const ascii = (s: string) => new Uint8Array(Buffer.from(s, 'latin1'));

test('FIPS 180-4 examples: "abc", the empty string, the two-block messages, a million "a"', () => {
  assert.is(hex(sha256(ascii('abc'))), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  assert.is(hex(sha256(new Uint8Array())), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  assert.is(
    hex(sha256(ascii('abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq'))),
    '248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1',
  );
  assert.is(
    hex(sha512(ascii('abc'))),
    'ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a' +
      '2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f',
  );
  assert.is(
    hex(sha512(new Uint8Array())),
    'cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce' +
      '47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e',
  );
  assert.is(
    hex(
      sha512(
        ascii(
          'abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn' +
            'hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu',
        ),
      ),
    ),
    '8e959b75dae313da8cf4f72814fc143f8f7779c6eb9f7fa17299aeadb6889018' +
      '501d289e4900f7e4331b99dec4b5433ac7d329eeb6dd26545e96e55b874be909',
  );
  const million = new Uint8Array(1_000_000).fill(0x61);
  assert.is(hex(sha256(million)), 'cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0');
  assert.is(
    hex(sha512(million)),
    'e718483d0ce769644e2e42c7bc15b4638e1f98b13b2044285632a803afa973eb' +
      'de0ff244877ea60a4cb0432ce577c31beb009c5c2c49aa2e4eadb217ad8cc09b',
  );
});

test('agrees with node:crypto on every length 0–600 (block and length-field boundaries)', () => {
  for (let n = 0; n <= 600; n++) {
    const m = new Uint8Array(nodeCrypto.randomBytes(n));
    assert.is(hex(sha256(m)), nodeCrypto.createHash('sha256').update(m).digest('hex'), `sha256 of ${n} bytes`);
    assert.is(hex(sha512(m)), nodeCrypto.createHash('sha512').update(m).digest('hex'), `sha512 of ${n} bytes`);
  }
});

test('HMAC-SHA-256: RFC 4231 case 2, and node:crypto on short, block-sized and long keys', () => {
  assert.is(
    hex(hmacSha256(ascii('Jefe'), ascii('what do ya want for nothing?'))),
    '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843',
  );
  for (const kl of [0, 1, 32, 63, 64, 65, 200]) {
    const k = new Uint8Array(nodeCrypto.randomBytes(kl));
    const d = new Uint8Array(nodeCrypto.randomBytes(kl * 3 + 1));
    assert.is(hex(hmacSha256(k, d)), nodeCrypto.createHmac('sha256', k).update(d).digest('hex'), `key of ${kl} bytes`);
  }
});

test.run();
