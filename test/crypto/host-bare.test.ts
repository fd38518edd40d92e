// A host like QuickJS on the firmware: no node:crypto, no WebCrypto, no getRandomValues, no
// TextEncoder. The default facade must fall back to noble, ask for a random source, and still
// sign, verify, hash and thumbprint. (Each test file runs in its own process, so the host is
// stripped before anything probes it.)
import * as nodeCrypto from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';

const g = globalThis as Record<string, unknown>;
delete (process as { getBuiltinModule?: unknown }).getBuiltinModule;
Object.defineProperty(globalThis, 'crypto', { value: undefined, configurable: true, writable: true });
delete g['TextEncoder'];
delete g['TextDecoder'];

const c = await import('../../src/crypto/index.js');
const { edgeCrypto } = await import('../../src/crypto/edge.js');
const { utf8Encode } = await import('../../src/encoding/utf8.js');
const { registerP256 } = await import('../../src/crypto/algorithm-support.js');
const { nobleP256 } = await import('../../src/entries/p256.js');

const msg = utf8Encode('ctl-sba/1\n{}');

test('the host really is bare', () => {
  assert.is(g['crypto'], undefined);
  assert.is(g['TextEncoder'], undefined);
  assert.is((process as { getBuiltinModule?: unknown }).getBuiltinModule, undefined);
});

test('auto picks noble; native cannot be chosen', () => {
  assert.is(c.getCryptoBackendName(), 'noble');
  assert.throws(() => c.setCryptoBackend('native'), /neither node:crypto nor WebCrypto/);
  assert.is(c.getCryptoBackendName(), 'noble');
});

test('randomBytes: a clear error until the firmware installs a source', async () => {
  assert.throws(() => c.randomBytes(16), /setRandomSource/);
  try {
    await c.generateKeyPair({ alg: 'EdDSA' });
    assert.unreachable('generated a key without randomness');
  } catch (e) {
    assert.match((e as Error).message, /setRandomSource/);
  }
  c.setRandomSource((n) => new Uint8Array(nodeCrypto.randomBytes(n)));
  assert.is(c.randomBytes(16).length, 16);
});

test(
  'without a registered P-256: Ed25519 works, P-256 is unsupported_algorithm (a result ' +
    'from the verifier, never a pass)',
  async () => {
    const ed = await c.generateKeyPair({ alg: 'EdDSA' });
    const edSig = await (await c.defaultCrypto.importSigningKey(ed.privateKeyPem)).sign(msg);
    assert.ok(await c.defaultCrypto.verifyWithJwk(ed.publicJwk, msg, edSig));
    const unsupported = async (p: Promise<unknown>, what: string) => {
      try {
        await p;
        assert.unreachable(`${what}: accepted without a P-256 backend`);
      } catch (e) {
        assert.is((e as { code?: string }).code, 'unsupported_algorithm', what);
      }
    };
    await unsupported(c.generateKeyPair({ alg: 'ES256' }), 'generateKeyPair ES256');
    const p256Pem = nodeCrypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const p256Jwk = p256Pem.publicKey.export({ format: 'jwk' }) as any;
    const sig = new Uint8Array(nodeCrypto.sign('sha256', msg, { key: p256Pem.privateKey, dsaEncoding: 'ieee-p1363' }));
    await unsupported(
      c.defaultCrypto.verifyWithJwk({ kty: 'EC', crv: 'P-256', x: p256Jwk.x, y: p256Jwk.y }, msg, sig),
      'verifyWithJwk ES256',
    );
    await unsupported(
      c.importSigningKey(p256Pem.privateKey.export({ format: 'pem', type: 'pkcs8' }) as string),
      'importSigningKey ES256',
    );
    assert.throws(() => registerP256({} as never), /publicKey, sign and verify/);
  },
);

test('noble signs and verifies both algorithms once P-256 is registered; OpenSSL agrees', async () => {
  registerP256(nobleP256);
  for (const alg of ['EdDSA', 'ES256'] as const) {
    const kp = await c.generateKeyPair({ alg });
    const key = await c.defaultCrypto.importSigningKey(kp.privateKeyPem);
    const sig = await key.sign(msg);
    assert.ok(await c.defaultCrypto.verifyWithJwk(kp.publicJwk, msg, sig), alg);
    const h = alg === 'ES256' ? 'sha256' : null;
    const pub = nodeCrypto.createPublicKey(kp.publicKeyPem);
    assert.ok(
      nodeCrypto.verify(h, msg, { key: pub, dsaEncoding: 'ieee-p1363' }, sig),
      `${alg}: OpenSSL verifies the noble signature`,
    );
    assert.equal(pub.export({ format: 'jwk' }), kp.publicJwk);
  }
});

test('sha256Sync, hmacSha256 and thumbprints without node:crypto', async () => {
  for (const n of [0, 1, 55, 56, 64, 1000]) {
    const data = new Uint8Array(nodeCrypto.randomBytes(n));
    const key = new Uint8Array(nodeCrypto.randomBytes(n % 100));
    assert.is(c.sha256HexSync(data), nodeCrypto.createHash('sha256').update(data).digest('hex'));
    assert.is(
      Buffer.from(c.hmacSha256(key, data)).toString('hex'),
      nodeCrypto.createHmac('sha256', key).update(data).digest('hex'),
    );
    assert.is(await c.sha256Hex(data), c.sha256HexSync(data));
  }
  assert.is(
    await c.jwkThumbprint({ kty: 'OKP', crv: 'Ed25519', x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo' }),
    'kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k',
  );
});

test('the edge facade says it needs WebCrypto', async () => {
  try {
    await edgeCrypto.importVerifyingKey({
      kty: 'OKP',
      crv: 'Ed25519',
      x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo',
    });
    assert.unreachable('edge worked without WebCrypto');
  } catch (e) {
    assert.match((e as Error).message, /WebCrypto/);
  }
});

test.run();
