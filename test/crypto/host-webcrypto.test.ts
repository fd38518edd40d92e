// A host with WebCrypto but no node:crypto (browsers, Deno, workers): auto probes WebCrypto once
// and uses it when it has Ed25519, and noble when it does not.
import * as nodeCrypto from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';

delete (process as { getBuiltinModule?: unknown }).getBuiltinModule;
const realCrypto = globalThis.crypto;

const c = await import('../../src/crypto/index.js');
const { CtlError } = await import('../../src/errors.js');
const { utf8Encode } = await import('../../src/encoding/utf8.js');
const msg = utf8Encode('ctl-bundle/1\n{}');
const N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;

test('auto is undecided until the first use, then native (WebCrypto)', async () => {
  assert.is(c.getCryptoBackendName(), 'auto');
  assert.is((await c.getCryptoBackend()).name, 'native');
  assert.is(c.getCryptoBackendName(), 'native');
});

test('WebCrypto backend: sign, verify, low-S, OpenSSL agrees', async () => {
  for (const alg of ['EdDSA', 'ES256'] as const) {
    const kp = await c.generateKeyPair({ alg });
    const key = await c.importSigningKey(kp.privateKeyPem);
    for (let i = 0; i < 16; i++) {
      const sig = await key.sign(msg);
      assert.ok(await c.verifyWithJwk(kp.publicJwk, msg, sig));
      if (alg === 'ES256') assert.ok(BigInt('0x' + Buffer.from(sig.subarray(32)).toString('hex')) <= N / 2n, 'low S');
      const h = alg === 'ES256' ? 'sha256' : null;
      assert.ok(
        nodeCrypto.verify(h, msg, { key: nodeCrypto.createPublicKey(kp.publicKeyPem), dsaEncoding: 'ieee-p1363' }, sig),
      );
    }
  }
});

test('without node:crypto a non-extractable private CryptoKey needs options.publicKey', async () => {
  const pair = (await crypto.subtle.generateKey({ name: 'Ed25519' }, false, ['sign', 'verify'])) as CryptoKeyPair;
  try {
    await c.importSigningKey(pair.privateKey);
    assert.unreachable('derived a public key WebCrypto cannot give');
  } catch (e) {
    assert.instance(e, CtlError);
  }
  const key = await c.importSigningKey(pair.privateKey, { publicKey: pair.publicKey });
  assert.ok(await c.verifyWithJwk(key.publicJwk, msg, await key.sign(msg)));
});

test('WebCrypto without Ed25519 (older browsers): auto falls back to noble', async () => {
  const subtle = new Proxy(realCrypto.subtle, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target);
      if (prop !== 'importKey') return typeof v === 'function' ? v.bind(target) : v;
      return (format: string, data: unknown, algo: { name?: string }, ...rest: unknown[]) =>
        algo?.name === 'Ed25519'
          ? Promise.reject(new DOMException('Unrecognized name', 'NotSupportedError'))
          : (v as Function).call(target, format, data, algo, ...rest);
    },
  });
  Object.defineProperty(globalThis, 'crypto', {
    value: { subtle, getRandomValues: (a: Uint8Array<ArrayBuffer>) => realCrypto.getRandomValues(a) },
    configurable: true,
  });
  try {
    c.setCryptoBackend('auto');
    assert.is((await c.getCryptoBackend()).name, 'noble');
    const kp = await c.generateKeyPair({ alg: 'EdDSA' });
    const key = await c.importSigningKey(kp.privateKeyPem);
    assert.ok(await c.verifyWithJwk(kp.publicJwk, msg, await key.sign(msg)));
  } finally {
    Object.defineProperty(globalThis, 'crypto', { value: realCrypto, configurable: true });
    c.setCryptoBackend('auto');
  }
  assert.is((await c.getCryptoBackend()).name, 'native');
});

test.run();
