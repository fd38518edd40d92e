// Both backends (and the edge facade): sign → verify, cross-backend, ES256 low-S emission and
// high-S acceptance, strictness of each backend on its own, the key cache, hashes, randomness and
// backend selection.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as nodeCrypto from 'node:crypto';
import { CtlError } from '../../src/errors.js';
import { utf8Encode } from '../../src/encoding/utf8.js';
import {
  createCtlCrypto,
  cryptoBackend,
  defaultCrypto,
  generateKeyPair,
  getCryptoBackendName,
  hmacSha256,
  randomBytes,
  setCryptoBackend,
  setRandomSource,
  sha256,
  sha256Hex,
  sha256HexSync,
  sha256Sync,
} from '../../src/crypto/index.js';
import { lowS, signatureShapeOk } from '../../src/crypto/strict.js';
import type { Alg } from '../../src/crypto/types.js';
import { facades, hex, readJson, sourcesCount, toHex } from './helpers.js';

const N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
const L = 2n ** 252n + 27742317777372353535851937790883648493n;
const msg = utf8Encode('ctl-grant/1\n{"grantId":"g1"}');
const big = (b: Uint8Array) => BigInt('0x' + (toHex(b) || '0'));
const be32 = (n: bigint) => hex(n.toString(16).padStart(64, '0'));
const le32 = (n: bigint) => be32(n).reverse();

test('sign → verify on every facade and algorithm; a changed message or signature is refused', async () => {
  for (const alg of ['EdDSA', 'ES256'] as Alg[]) {
    const kp = await generateKeyPair({ alg });
    for (const [name, c] of facades) {
      const s = await c.importSigningKey(kp.privateKeyPem);
      assert.is(s.alg, alg);
      const v = await c.importVerifyingKey(kp.publicKeyPem);
      const sig = await s.sign(msg);
      assert.is(sig.length, 64);
      assert.ok(await v.verify(msg, sig), `${name} ${alg}`);
      assert.not.ok(await v.verify(utf8Encode('ctl-grant/1\n{"grantId":"g2"}'), sig), `${name} ${alg}: other message`);
      for (const i of [0, 31, 32, 63]) {
        const flipped = sig.slice();
        flipped[i]! ^= 0x01;
        assert.not.ok(await v.verify(msg, flipped), `${name} ${alg}: bit ${i}`);
      }
    }
  }
});

test('cross-backend: what one signs, every other verifies; Ed25519 signatures are identical', async () => {
  for (const alg of ['EdDSA', 'ES256'] as Alg[]) {
    const kp = await generateKeyPair({ alg });
    const sigs: string[] = [];
    for (const [signer, a] of facades) {
      const sig = await (await a.importSigningKey(kp.privateKeyPem)).sign(msg);
      sigs.push(toHex(sig));
      for (const [verifier, b] of facades)
        assert.ok(await b.verifyWithJwk(kp.publicJwk, msg, sig), `${alg}: ${signer} → ${verifier}`);
    }
    if (alg === 'EdDSA') assert.is(new Set(sigs).size, 1);
  }
});

test('ES256: every facade emits low-S, and every facade accepts the high-S twin (PROTOCOL.md §3)', async () => {
  const kp = await generateKeyPair({ alg: 'ES256' });
  for (const [name, c] of facades) {
    const s = await c.importSigningKey(kp.privateKeyPem);
    for (let i = 0; i < 64; i++) {
      const m = utf8Encode(`message ${i}`);
      const sig = await s.sign(m);
      const sv = big(sig.subarray(32));
      assert.ok(sv <= N / 2n, `${name}: high S emitted`);
      const high = new Uint8Array([...sig.subarray(0, 32), ...be32(N - sv)]);
      for (const [other, o] of facades)
        assert.ok(await o.verifyWithJwk(kp.publicJwk, m, high), `${other} refuses high S from ${name}`);
    }
  }
  // node:crypto signs with random k, so about half of its raw signatures are high-S: lowS must fold them.
  const priv = nodeCrypto.createPrivateKey(kp.privateKeyPem);
  let folded = 0;
  for (let i = 0; i < 32; i++) {
    const raw = new Uint8Array(nodeCrypto.sign('sha256', msg, { key: priv, dsaEncoding: 'ieee-p1363' }));
    const low = lowS(raw);
    if (low !== raw) folded++;
    assert.ok(big(low.subarray(32)) <= N / 2n);
  }
  assert.ok(folded > 0, 'no high-S in 32 random signatures (probability 2^-32)');
});

test('strictness is in each backend itself, not only in the facades', async () => {
  for (const name of ['native', 'noble'] as const) {
    const b = cryptoBackend(name);
    // An order-8 point: node:crypto alone would import it.
    const small = {
      kty: 'OKP' as const,
      crv: 'Ed25519' as const,
      x: Buffer.from('26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05', 'hex').toString('base64url'),
    };
    try {
      await b.verifierFromJwk(small);
      assert.unreachable(`${name} imported a small-order key`);
    } catch (e) {
      assert.instance(e, CtlError);
    }
  }
  const kp = await generateKeyPair({ alg: 'EdDSA' });
  for (const [name, c] of facades) {
    const sig = await (await c.importSigningKey(kp.privateKeyPem)).sign(msg);
    // S + L: the same equation, a non-canonical S (malleability) — refused.
    const sPlusL = new Uint8Array([...sig.subarray(0, 32), ...le32(big(sig.subarray(32).slice().reverse()) + L)]);
    assert.not.ok(await c.verifyWithJwk(kp.publicJwk, msg, sPlusL), `${name}: S + L`);
  }
  // The shape rules directly: S ≥ L, small-order R, r or s out of [1, n-1], length.
  const good = new Uint8Array(64);
  good.set(hex('5866666666666666666666666666666666666666666666666666666666666666'), 0); // the base point
  assert.ok(signatureShapeOk('EdDSA', good));
  assert.not.ok(signatureShapeOk('EdDSA', new Uint8Array([...good.subarray(0, 32), ...le32(L)])));
  assert.ok(signatureShapeOk('EdDSA', new Uint8Array([...good.subarray(0, 32), ...le32(L - 1n)])));
  assert.not.ok(signatureShapeOk('EdDSA', new Uint8Array([1, ...new Uint8Array(63)])), 'R = identity');
  assert.not.ok(signatureShapeOk('EdDSA', good.subarray(0, 63)));
  assert.ok(signatureShapeOk('ES256', new Uint8Array([...be32(1n), ...be32(N - 1n)])));
  assert.not.ok(signatureShapeOk('ES256', new Uint8Array([...be32(0n), ...be32(1n)])));
  assert.not.ok(signatureShapeOk('ES256', new Uint8Array([...be32(1n), ...be32(N)])));
  assert.not.ok(signatureShapeOk('ES256', new Uint8Array([...be32(N), ...be32(1n)])));
});

test('cache: one import per key (JWK members or PEM text), bounded', async () => {
  const c = createCtlCrypto('native');
  const kp = await generateKeyPair({ alg: 'ES256' });
  const a = await c.importVerifyingKey(kp.publicJwk);
  assert.is(await c.importVerifyingKey({ ...kp.publicJwk }), a, 'same members, other object');
  assert.is(
    await c.importVerifyingKey({ ...kp.publicJwk, kid: 'k', alg: 'ES256' } as never),
    a,
    'extra members ignored',
  );
  assert.is(await c.importVerifyingKey(kp.publicKeyPem), a, 'PEM of the same key');
  assert.is(await c.importVerifyingKey(kp.publicKeyPem), a, 'PEM text hit');
  assert.ok(Object.isFrozen(a.publicJwk), 'a cached key cannot be changed by a caller');
  const other = createCtlCrypto('native');
  assert.is.not(await other.importVerifyingKey(kp.publicJwk), a, 'each facade has its own cache');
  // 256 other keys push it out.
  for (let i = 0; i < 257; i++) await c.importVerifyingKey((await generateKeyPair({ alg: 'EdDSA' })).publicJwk);
  assert.is.not(await c.importVerifyingKey(kp.publicJwk), a, 'evicted after 256 newer keys');
});

test('sha256, sha256Sync, hex forms and the backends agree (FIPS 180-2 "abc")', async () => {
  const abc = utf8Encode('abc');
  const want = 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad';
  assert.is(sha256HexSync(abc), want);
  assert.is(await sha256Hex(abc), want);
  assert.is(toHex(sha256Sync(abc)), want);
  assert.is(toHex(await sha256(abc)), want);
  for (const [name, c] of facades) assert.is(toHex(await c.sha256(abc)), want, name);
  assert.is(Object.getPrototypeOf(sha256Sync(abc)), Uint8Array.prototype, 'a plain Uint8Array, never a Buffer');
});

test('hmacSha256: every Wycheproof HMAC-SHA-256 case', () => {
  const FILE = 'wycheproof/hmac_sha256_test.json';
  const data = readJson(FILE);
  let read = 0;
  for (const group of data.testGroups) {
    for (const t of group.tests) {
      read++;
      const tag = toHex(hmacSha256(hex(t.key), hex(t.msg)).subarray(0, group.tagSize / 8));
      assert.is(tag === t.tag, t.result === 'valid', `tcId ${t.tcId}`);
    }
  }
  assert.ok(read >= sourcesCount(FILE), `read ${read}`);
});

test('randomBytes: host CSPRNG, an installed source wins, wrong sources and sizes throw', () => {
  const a = randomBytes(32);
  assert.is(a.length, 32);
  assert.is.not(toHex(a), toHex(randomBytes(32)));
  assert.is(randomBytes(0).length, 0);
  assert.is(randomBytes(70000).length, 70000, 'more than one getRandomValues call');
  assert.throws(() => randomBytes(-1), RangeError);
  assert.throws(() => randomBytes(1.5), RangeError);
  setRandomSource((n) => new Uint8Array(n).fill(7));
  try {
    assert.equal([...randomBytes(3)], [7, 7, 7]);
    assert.equal([...defaultCrypto.randomBytes(2)], [7, 7]);
    setRandomSource(() => new Uint8Array(1));
    assert.throws(() => randomBytes(4), /wrong number of bytes/);
  } finally {
    setRandomSource(undefined);
  }
  assert.is.not(toHex(randomBytes(8)), '0707070707070707');
});

test('backend selection: auto is native here; noble on request; the default facade follows', async () => {
  assert.is(getCryptoBackendName(), 'native');
  const kp = await generateKeyPair({ alg: 'EdDSA' });
  const sig = await (await defaultCrypto.importSigningKey(kp.privateKeyPem)).sign(msg);
  setCryptoBackend('noble');
  try {
    assert.is(getCryptoBackendName(), 'noble');
    const k = await defaultCrypto.importVerifyingKey(kp.publicJwk);
    assert.ok(await k.verify(msg, sig));
    assert.is.not(k, await createCtlCrypto('native').importVerifyingKey(kp.publicJwk));
  } finally {
    setCryptoBackend('auto');
  }
  assert.is(getCryptoBackendName(), 'native');
  assert.throws(() => setCryptoBackend('openssl' as never), RangeError);
});

test.run();
