import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  didKeyToJwk,
  didKeyFromJwk,
  didKeyUrl,
  isDidKey,
  CtlError,
  base64urlEncode,
  importSigningKey,
} from '../../src/index.js';
import { base58Decode, base58Encode } from '../../src/encoding/base58.js';
import { readVectorJson } from '../helpers/vectors.js';

const codeOf = (e: unknown) => (e instanceof CtlError ? e.code : String(e));
const refuses = (did: string, code: string) => {
  try {
    didKeyToJwk(did);
  } catch (e) {
    return assert.is(codeOf(e), code, did);
  }
  assert.unreachable(`${did} accepted`);
};

test('base58btc: leading zeros, round trip, strict alphabet', () => {
  assert.is(base58Encode(new Uint8Array([0, 0, 1])), '112');
  assert.equal([...base58Decode('112')], [0, 0, 1]);
  assert.is(base58Encode(new Uint8Array()), '');
  const bytes = Uint8Array.from({ length: 40 }, (_, i) => (i * 37) & 0xff);
  assert.equal(base58Decode(base58Encode(bytes)), bytes);
  for (const bad of ['0', 'O', 'I', 'l', '+', ' ', 'é'])
    assert.throws(
      () => base58Decode('z' + bad),
      (e: unknown) => codeOf(e) === 'malformed',
    );
});

test('Ed25519 vectors of the did:key method: DID ↔ key, and the seed signs for the DID', async () => {
  const vectors = readVectorJson<Record<string, any>>('did-key/ed25519-x25519.json');
  assert.ok(Object.keys(vectors).length >= 5);
  for (const [did, v] of Object.entries(vectors)) {
    assert.ok(did.startsWith('did:key:z6Mk'), did);
    const vm = v.didDocument.verificationMethod[0];
    const x = vm.publicKeyJwk ? vm.publicKeyJwk.x : base64urlEncode(base58Decode(vm.publicKeyBase58));
    const jwk = { kty: 'OKP', crv: 'Ed25519', x };
    assert.equal(didKeyToJwk(did), jwk, did);
    assert.is(didKeyFromJwk(jwk as any), did);
    assert.is(vm.id, didKeyUrl(did));
    assert.ok(isDidKey(did));
    if (typeof v.seed === 'string' && /^[0-9a-f]{64}$/.test(v.seed)) {
      const seed = Uint8Array.from(v.seed.match(/../g).map((h: string) => parseInt(h, 16)));
      const signer = await importSigningKey(seed, { alg: 'EdDSA' });
      assert.is(didKeyFromJwk(signer.publicJwk), did, 'seed → DID');
    }
  }
});

test('P-256 vectors decompress to their JWK; P-384 and P-521 are refused as unsupported', () => {
  const vectors = readVectorJson<Record<string, any>>('did-key/nist-curves.json');
  let p256 = 0;
  let other = 0;
  for (const [did, v] of Object.entries(vectors)) {
    let jwk = v.verificationMethod.publicKeyJwk;
    if (!jwk) {
      // Given as base58 SEC1 bytes: compressed (33) or uncompressed (65), always P-256 here.
      const raw = base58Decode(v.verificationMethod.publicKeyBase58);
      const x = base64urlEncode(raw.subarray(1, 33));
      jwk = { crv: 'P-256', x, y: raw.length === 65 ? base64urlEncode(raw.subarray(33)) : didKeyToJwk(did).y };
      assert.is(didKeyToJwk(did).x, x);
    }
    if (jwk.crv === 'P-256') {
      p256++;
      assert.ok(did.startsWith('did:key:zDn'), did);
      assert.equal(didKeyToJwk(did), { kty: 'EC', crv: 'P-256', x: jwk.x, y: jwk.y }, did);
      assert.is(didKeyFromJwk({ kty: 'EC', crv: 'P-256', x: jwk.x, y: jwk.y }), did);
    } else {
      other++;
      refuses(did, 'unsupported_algorithm');
    }
  }
  assert.ok(p256 >= 3 && other >= 4, `${p256} P-256, ${other} others`);
});

test('malformed DIDs are refused with malformed', () => {
  const good = 'did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp';
  const bytes = base58Decode(good.slice(9));
  const enc = (b: number[] | Uint8Array) => 'did:key:z' + base58Encode(Uint8Array.from(b));
  for (const bad of [
    '',
    'did:web:example.com',
    'did:key:',
    'did:key:z',
    'did:key:f' + good.slice(9),
    'did:key:Z' + good.slice(9),
    good + '#' + good.slice(8),
    good.slice(0, -1),
    good + '1',
    'did:key:z0' + good.slice(10),
    'did:key:z' + '2'.repeat(200),
    enc([...bytes.subarray(0, 2), ...new Uint8Array(32)]), // identity-ish: y = 0 is of small order
    enc([0xed, 0x81, 0x00, ...bytes.subarray(2)]), // non-minimal varint
    enc([0x80, 0x24, 4, ...new Uint8Array(64)]), // uncompressed P-256 is not the method's form
    enc([0x80, 0x24, 2, ...new Uint8Array(32).fill(0xff)]), // x ≥ p
    enc([0x01, ...bytes.subarray(2)]), // unknown multicodec
  ])
    refuses(bad, 'malformed');
  assert.not.ok(isDidKey(good + '#x') || isDidKey('did:key:z0abc') || isDidKey(42));
});

test.run();
