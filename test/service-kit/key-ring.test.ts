/** The key-ring core both services share (service-kit/key-ring.ts): sealed keys, signer cache, held keys, JWKS. */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { generateKeyPair, importSigningKey, jwkThumbprint, type PublicJwk } from '../../src/index.js';
import { aesKeyWrapper, createSealer, isSealed } from '../../service-kit/secrets/index.js';
import { activeKey, createKeyRingCore, jwksEntry, type KeyStore, type StoredKey } from '../../service-kit/key-ring.js';

const sealer = createSealer(aesKeyWrapper(randomBytes(32), 'TEST_KEK'), 'TEST_KEK');
const missing = (k: StoredKey) => new Error(`no private key for '${k.kid}'`);

/** A KeyStore over an array, as a service implements one over its table. */
function memoryStore(rows: StoredKey[] = []): KeyStore & { rows: StoredKey[] } {
  return {
    rows,
    list: async () => rows.map((r) => ({ ...r })),
    async replacePrivatePem(kid, from, to) {
      const r = rows.find((k) => k.kid === kid && k.privatePem === from);
      if (r) r.privatePem = to;
      return Boolean(r);
    },
    async insertActive(purpose, key, effect) {
      for (const r of rows) if (r.purpose === purpose && r.status === 'active') r.status = 'retired';
      rows.push({ kid: key.kid, purpose, status: 'active', privatePem: key.sealedPem });
      if (effect) await effect(null as never);
    },
  };
}
const refused = async (p: Promise<unknown>) => {
  try {
    await p;
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('expected a refusal');
};

test('generate: kid is the thumbprint; the private key is sealed for its row and opens to the same key', async () => {
  const ring = createKeyRingCore({ sealer, store: memoryStore(), table: 'keys_a', missing });
  const k = await ring.generate();
  assert.is(k.kid, await jwkThumbprint(k.publicJwk));
  assert.ok(isSealed(k.sealedPem));
  assert.is(ring.sealContext(k.kid), `keys_a:${k.kid}`);
  const signer = await ring.signerOf({ kid: k.kid, purpose: 'grant', status: 'active', privatePem: k.sealedPem });
  assert.equal(signer.publicJwk, k.signingKey.publicJwk);
  // Sealed for `keys_a:<kid>`: another table's ring, or another kid, does not open it.
  const other = createKeyRingCore({ sealer, store: memoryStore(), table: 'keys_b', missing });
  await refused(other.signerOf({ kid: k.kid, purpose: 'grant', status: 'active', privatePem: k.sealedPem }));
  await refused(ring.signerOf({ kid: 'moved', purpose: 'grant', status: 'active', privatePem: k.sealedPem }));
});

test('signerOf: one import per kid, failed opens not cached, held keys first, a key with neither refused', async () => {
  const prepared: string[] = [];
  const ring = createKeyRingCore({
    sealer,
    store: memoryStore(),
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
  const ring = createKeyRingCore({ sealer, store: memoryStore(), table: 't', missing });
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

test('rotate: the new key active through the store, the old one retired; the effect learns it', async () => {
  const store = memoryStore([{ kid: 'old', purpose: 'grant', status: 'active', privatePem: null }]);
  const ring = createKeyRingCore({ sealer, store, table: 't', missing });
  const seen: string[] = [];
  const k = await ring.rotate('grant', async (_q, key) => void seen.push(key.kid));
  assert.equal(seen, [k.kid]);
  assert.equal(
    store.rows.map((r) => [r.kid, r.status]),
    [
      ['old', 'retired'],
      [k.kid, 'active'],
    ],
  );
  assert.is(activeKey(await store.list(), 'grant')?.kid, k.kid);
  const signer = await ring.signerOf(activeKey(await store.list(), 'grant')!);
  assert.equal(signer.publicJwk, k.signingKey.publicJwk);
});

test("sealStored: seals the store's clear keys in place", async () => {
  const pair = await generateKeyPair({ alg: 'EdDSA' });
  const store = memoryStore([{ kid: 'k', purpose: 'grant', status: 'active', privatePem: pair.privateKeyPem }]);
  const ring = createKeyRingCore({ sealer, store, table: 't', missing });
  assert.is(await ring.sealStored(), 1);
  assert.ok(isSealed(store.rows[0].privatePem!));
  assert.is(await ring.sealStored(), 0);
  assert.is(await sealer.open(store.rows[0].privatePem!, 't:k'), pair.privateKeyPem);
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
  const jwk: PublicJwk = { kty: 'OKP', crv: 'Ed25519', x: 'AA' };
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
