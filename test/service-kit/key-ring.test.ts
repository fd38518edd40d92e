/** The key-ring core both services share (service-kit/key-ring.ts): sealed keys, signer cache, held keys, JWKS. */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { generateKeyPair, importSigningKey, jwkThumbprint } from '../../src/index.js';
import { aesKeyWrapper, createSealer, isSealed } from '../../service-kit/secrets/index.js';
import { activeKey, createKeyRingCore, jwksEntry, type StoredKey } from '../../service-kit/key-ring.js';

const sealer = createSealer(aesKeyWrapper(randomBytes(32), 'TEST_KEK'), 'TEST_KEK');
const missing = (k: StoredKey) => new Error(`no private key for '${k.kid}'`);
const refused = async (p: Promise<unknown>) => {
  try {
    await p;
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('expected a refusal');
};

test('generate: kid is the thumbprint; the private key is sealed for its row and opens to the same key', async () => {
  const ring = createKeyRingCore({ sealer, table: 'keys_a', missing });
  const k = await ring.generate();
  assert.is(k.kid, await jwkThumbprint(k.publicJwk));
  assert.ok(isSealed(k.sealedPem));
  assert.is(ring.sealContext(k.kid), `keys_a:${k.kid}`);
  const signer = await ring.signerOf({ kid: k.kid, purpose: 'grant', status: 'active', privatePem: k.sealedPem });
  assert.equal(signer.publicJwk, k.signingKey.publicJwk);
  // Sealed for `keys_a:<kid>`: another table's ring, or another kid, does not open it.
  const other = createKeyRingCore({ sealer, table: 'keys_b', missing });
  await refused(other.signerOf({ kid: k.kid, purpose: 'grant', status: 'active', privatePem: k.sealedPem }));
  await refused(ring.signerOf({ kid: 'moved', purpose: 'grant', status: 'active', privatePem: k.sealedPem }));
});

test('signerOf: one import per kid, failed opens not cached, held keys first, a key with neither refused', async () => {
  const prepared: string[] = [];
  const ring = createKeyRingCore({
    sealer,
    table: 't',
    missing,
    prepare: (key, pem) => (prepared.push(pem), key),
  });
  const pair = await generateKeyPair({ alg: 'EdDSA' });
  const kid = await jwkThumbprint(pair.publicJwk);
  const row: StoredKey = { kid, purpose: 'receipt', status: 'active', privatePem: pair.privateKeyPem };
  const [a, b] = await Promise.all([ring.signerOf(row), ring.signerOf(row)]);
  assert.is(a, b);
  assert.is(prepared.length, 1, 'imported (and prepared) once');

  const broken: StoredKey = { kid: 'x', purpose: 'receipt', status: 'active', privatePem: 'ctl-sealed/1.bad.bad.bad' };
  await refused(ring.signerOf(broken));
  const sealed = await sealer.seal(pair.privateKeyPem, 't:x');
  assert.ok(await ring.signerOf({ ...broken, privatePem: sealed }), 'the failure was not cached');

  assert.is(await refused(ring.signerOf({ ...row, kid: 'ext', privatePem: '' })), "no private key for 'ext'");
  const held = await importSigningKey(pair.privateKeyPem);
  ring.hold('ext', held);
  assert.is(ring.held('ext'), held);
  assert.is(await ring.signerOf({ ...row, kid: 'ext', privatePem: null }), held);
});

test('sealClearKeys: seals only keys in the clear, by the conditional replace; counts what it changed', async () => {
  const ring = createKeyRingCore({ sealer, table: 't', missing });
  const pair = await generateKeyPair({ alg: 'EdDSA' });
  const calls: [string, string, string][] = [];
  const n = await ring.sealClearKeys(
    [
      { kid: 'clear', purpose: 'grant', status: 'active', privatePem: pair.privateKeyPem },
      { kid: 'gone', purpose: 'grant', status: 'retired', privatePem: pair.privateKeyPem },
      { kid: 'sealed', purpose: 'grant', status: 'active', privatePem: await sealer.seal('x', 't:sealed') },
      { kid: 'external', purpose: 'receipt', status: 'active', privatePem: '' },
      { kid: 'env', purpose: 'grant', status: 'active', privatePem: null },
    ],
    async (kid, clear, cell) => (calls.push([kid, clear, cell]), kid !== 'gone'),
  );
  assert.is(n, 1);
  assert.equal(
    calls.map(([kid, clear]) => [kid, clear]),
    [
      ['clear', pair.privateKeyPem],
      ['gone', pair.privateKeyPem],
    ],
  );
  assert.is(await sealer.open(calls[0][2], 't:clear'), pair.privateKeyPem);
});

test('activeKey and jwksEntry', () => {
  const rows = [
    { kid: 'a', purpose: 'grant', status: 'retired', source: 'generated' },
    { kid: 'b', purpose: 'grant', status: 'active', source: 'env' },
    { kid: 'c', purpose: 'grant', status: 'active', source: 'generated' },
    { kid: 'd', purpose: 'bundle', status: 'active', source: 'generated' },
  ];
  assert.is(activeKey(rows, 'grant')?.kid, 'b');
  assert.is(activeKey(rows, 'grant', (k) => k.source === 'generated')?.kid, 'c');
  assert.is(activeKey(rows, 'receipt'), undefined);
  const jwk = { kty: 'OKP', crv: 'Ed25519', x: 'AA' };
  assert.equal(jwksEntry({ publicJwk: jwk, kid: 'k', alg: 'EdDSA', purpose: 'grant', status: 'retired' }), {
    ...jwk,
    kid: 'k',
    alg: 'EdDSA',
    purposes: ['grant'],
    status: 'retired',
  });
  assert.equal(Object.keys(jwksEntry({ publicJwk: jwk, kid: 'k', alg: 'EdDSA', purpose: 'bundle' })), [
    'kty',
    'crv',
    'x',
    'kid',
    'alg',
    'purposes',
  ]);
});

test.run();
