/**
 * The authority's stored (generated) private keys are sealed under its KEK: nothing in the
 * database signs; a database from before sealing is sealed at start with the same keys (grants
 * keep verifying); a start with another KEK is refused with one line naming CTL_AUTHORITY_KEK.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateKeyPair, verifyPolicyGrant } from '../../src/index.js';
import { aesKeyWrapper, createSealer, isSealed, parseKek } from '../../service-kit/secrets/index.js';
import { grantRequest, startTestAuthority, type TestAuthority } from './harness.js';

async function issue(t: TestAuthority) {
  const wallet = await generateKeyPair({ alg: 'EdDSA' });
  const r = await t.call('POST', '/grants', await grantRequest(t, wallet.publicJwk));
  assert.is(r.status, 201);
  return r.body;
}

test('generated keys are stored sealed; a development KEK is made beside the database with mode 0600', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ctl-sealed-'));
  try {
    const t = await startTestAuthority({ dir, keepDir: true });
    const rows = await t.authority.store.listSigningKeys();
    assert.is(rows.length, 2);
    for (const r of rows) {
      assert.ok(r.privatePem && isSealed(r.privatePem), `${r.purpose} key sealed`);
      assert.not.ok(r.privatePem!.includes('PRIVATE KEY'));
    }
    assert.is(statSync(join(dir, 'authority.kek')).mode & 0o777, 0o600);
    const rotated = await t.call('POST', '/admin/keys/rotate');
    assert.is(rotated.status, 201);
    const row = await t.authority.store.getSigningKey(rotated.body.kid);
    assert.ok(isSealed(row!.privatePem!), 'a rotated key is stored sealed too');
    await t.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test(
  'a database with keys in the clear is sealed at start, same kids; another KEK is refused ' + 'naming the variable',
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ctl-sealed-'));
    const kek = randomBytes(32).toString('base64url');
    try {
      const a = await startTestAuthority({ dir, keepDir: true, env: { CTL_AUTHORITY_KEK: kek } });
      const before = await issue(a);
      // Turn the database into one from before sealing: each private key back in the clear.
      const sealer = createSealer(aesKeyWrapper(parseKek(kek, 'k'), 'k'), 'k');
      for (const r of await a.authority.store.listSigningKeys()) {
        const clear = await sealer.open(r.privatePem!, `signing_keys:${r.kid}`);
        assert.ok(await a.authority.store.replacePrivatePem(r.kid, r.privatePem!, clear));
      }
      assert.ok(
        (await a.authority.store.listSigningKeys()).every((r) =>
          r.privatePem!.startsWith('-----BEGIN PRIVATE KEY-----'),
        ),
      );
      await a.close();

      const b = await startTestAuthority({ dir, keepDir: true, env: { CTL_AUTHORITY_KEK: kek } });
      const rows = await b.authority.store.listSigningKeys();
      assert.ok(
        rows.every((r) => isSealed(r.privatePem!)),
        'sealed at start',
      );
      const after = await issue(b);
      assert.is(after.keyId, before.keyId, 'the same grant key, now sealed');
      const jwks = (await b.call('GET', '/.well-known/ctl-keys.json', undefined, null)).body;
      for (const g of [before, after]) assert.ok((await verifyPolicyGrant(g, { jwks })).valid);
      await b.close();

      let message = '';
      try {
        const c = await startTestAuthority({
          dir,
          keepDir: true,
          env: { CTL_AUTHORITY_KEK: randomBytes(32).toString('hex') },
        });
        await c.close();
      } catch (e) {
        message = (e as Error).message;
      }
      assert.match(message, /is sealed under KEK [0-9a-f]{16}, but CTL_AUTHORITY_KEK here is KEK/);
      assert.not.match(message, /\n/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

test.run();
