/**
 * Envelope encryption of stored secrets (service-kit/secrets): local KEK, development file, PKCS#11 AES key in
 * SoftHSM2.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { statSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createSoftHsm, SOFTHSM_MODULE } from '../helpers/softhsm.js';
import { testsNeeding } from '../helpers/system-packages.js';
import {
  aesKeyWrapper,
  createSealer,
  devKek,
  generatePkcs11AesKey,
  isSealed,
  kekFromEnv,
  parseKek,
} from '../../service-kit/secrets/index.js';
import { closePkcs11Modules } from '../../service-kit/signers/index.js';

const hsm = createSoftHsm(['ctl']);
const hsmTest = testsNeeding('softhsm2', 'a KEK inside a SoftHSM2 token');
test.after(() => {
  closePkcs11Modules();
  hsm.remove();
});
const refused = async (p: Promise<unknown>) => {
  try {
    await p;
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('expected a refusal');
};

test(
  'seal/open: the value round-trips, is not in the sealed text, and opens only in its ' + 'own row under its own KEK',
  async () => {
    const kek = randomBytes(32);
    const s = createSealer(aesKeyWrapper(kek, 'CTL_GATEWAY_KEK'), 'CTL_GATEWAY_KEK');
    const secret = '-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n';
    const sealed = await s.seal(secret, 'gw_keys:k1');
    assert.ok(isSealed(sealed));
    assert.not.ok(sealed.includes('PRIVATE'));
    assert.is.not(await s.seal(secret, 'gw_keys:k1'), sealed, 'a fresh data key and IV each time');
    assert.is(await s.open(sealed, 'gw_keys:k1'), secret);
    assert.match(await refused(s.open(sealed, 'gw_keys:k2')), /does not open under CTL_GATEWAY_KEK/);
    const other = createSealer(aesKeyWrapper(randomBytes(32), 'CTL_GATEWAY_KEK'), 'CTL_GATEWAY_KEK');
    assert.match(
      await refused(other.open(sealed, 'gw_keys:k1')),
      new RegExp(
        'sealed under KEK [0-9a-f]{16}, but CTL_GATEWAY_KEK here is KEK [0-9a-f]{16}' +
          '.*give every instance the same CTL_GATEWAY_KEK',
      ),
    );
    const parts = sealed.split('.');
    const body = Buffer.from(parts[3], 'base64url');
    body[body.length - 1] ^= 1;
    assert.match(
      await refused(s.open([...parts.slice(0, 3), body.toString('base64url')].join('.'), 'gw_keys:k1')),
      /does not open/,
    );
  },
);

test('parseKek: 32 bytes as base64url or hex, anything else refused naming the variable', () => {
  const k = randomBytes(32);
  assert.equal(parseKek(k.toString('base64url'), 'V'), k);
  assert.equal(parseKek(k.toString('hex'), 'V'), k);
  for (const bad of ['', 'short', randomBytes(31).toString('base64url'), randomBytes(32).toString('base64')]) {
    assert.throws(() => parseKek(bad, 'CTL_AUTHORITY_KEK'), /^CTL_AUTHORITY_KEK: expected 32 random bytes/);
  }
});

test('the development KEK is made once, mode 0600, and reused', async () => {
  const path = join(hsm.dir, 'data', 'gateway.kek');
  const a = devKek(path);
  assert.is(statSync(path).mode & 0o777, 0o600);
  assert.equal(devKek(path), a);
  const src = await kekFromEnv({}, 'CTL_GATEWAY_KEK', path);
  assert.is(src.source, 'dev-file');
  const sealed = await src.sealer.seal('x', 'c');
  assert.is(await (await kekFromEnv({}, 'CTL_GATEWAY_KEK', path)).sealer.open(sealed, 'c'), 'x');
  assert.is(readFileSync(path, 'utf8').trim().length, 43);
  const env = await kekFromEnv({ CTL_GATEWAY_KEK: randomBytes(32).toString('hex') }, 'CTL_GATEWAY_KEK', path);
  assert.is(env.source, 'env');
  assert.match(await refused(env.sealer.open(sealed, 'c')), /sealed under KEK/);
  assert.match(
    await refused(
      kekFromEnv({ CTL_GATEWAY_KEK: 'x', CTL_GATEWAY_KEK_PKCS11_URI: hsm.uri('k') }, 'CTL_GATEWAY_KEK', path),
    ),
    /both set/,
  );
});

hsmTest(
  'a KEK inside the token (PKCS#11 AES-GCM) seals and opens; a missing key is one line ' + 'naming the variable',
  async () => {
    await generatePkcs11AesKey(hsm.uri('gateway-kek'), { modulePath: SOFTHSM_MODULE });
    const env = { CTL_GATEWAY_KEK_PKCS11_URI: hsm.uri('gateway-kek'), CTL_PKCS11_MODULE: SOFTHSM_MODULE };
    const src = await kekFromEnv(env, 'CTL_GATEWAY_KEK', join(hsm.dir, 'unused.kek'));
    assert.is(src.source, 'pkcs11');
    assert.is(src.sealer.kekId, 'p11:gateway-kek');
    const sealed = await src.sealer.seal('session master', 'gw_secrets:m');
    assert.is(await src.sealer.open(sealed, 'gw_secrets:m'), 'session master');
    assert.match(await refused(src.sealer.open(sealed, 'gw_secrets:other')), /does not open/);
    await src.close();
    const again = await kekFromEnv(env, 'CTL_GATEWAY_KEK', join(hsm.dir, 'unused.kek'));
    assert.is(
      await again.sealer.open(sealed, 'gw_secrets:m'),
      'session master',
      'another process with the same token key opens it',
    );
    await again.close();
    const missing = await refused(
      kekFromEnv({ ...env, CTL_GATEWAY_KEK_PKCS11_URI: hsm.uri('nope') }, 'CTL_GATEWAY_KEK', ''),
    );
    assert.ok(missing.startsWith('CTL_GATEWAY_KEK_PKCS11_URI: no secret keys match'), missing);
  },
);

test.run();
