/**
 * The authority with its keys in an HSM (SoftHSM2 through PKCS#11): grants and Trust Bundles
 * signed inside the token verify against the JWKS and the root's public key; two instances on
 * one PostgreSQL database with different HSM grant keys both sign and publish (the lease of
 * README "Keys across instances"); a wrong PIN or a missing key stops the start with one line
 * naming the variable, never a fall-back to the database's key.
 */
import * as assert from 'uvu/assert';
import { execFile } from 'node:child_process';
import { createPublicKey } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSoftHsm, SOFTHSM_MODULE } from '../helpers/softhsm.js';
import { testsNeeding } from '../helpers/system-packages.js';
import { closePkcs11Modules, generatePkcs11Ed25519Key } from '../../service-kit/signers/index.js';
import { generatePkcs11AesKey } from '../../service-kit/secrets/index.js';
import { generateKeyPair, jwkThumbprint, verifyPolicyGrant, verifyTrustBundle } from '../../src/index.js';
import { grantRequest, startTestAuthority, type TestAuthority } from './harness.js';
import { PG_URL, dropSchema, freshSchema, pgAvailable } from '../service-kit/pg-fixture.js';
import { startRefusal } from '../helpers/refused-start.js';

const test = testsNeeding('softhsm2', "the authority's keys in a SoftHSM2 token");

const GRANT_URI = 'CTL_POLICY_GRANT_SIGNING_KEY_PKCS11_URI';
const ROOT_URI = 'CTL_TRUST_BUNDLE_ROOT_KEY_PKCS11_URI';
const hsm = createSoftHsm(['ctl', 'spare']);
const spareUri = (object: string, pin = hsm.pin) => `pkcs11:token=spare;object=${object}?pin-value=${pin}`;
const keys: Record<string, { publicJwk: object }> = {};

test.before(async () => {
  for (const label of ['grant-a', 'grant-b', 'root']) {
    const s = await generatePkcs11Ed25519Key(hsm.uri(label), { modulePath: SOFTHSM_MODULE });
    keys[label] = { publicJwk: s.publicJwk };
    await s.close();
  }
  const spare = await generatePkcs11Ed25519Key(spareUri('grant'), { modulePath: SOFTHSM_MODULE });
  await spare.close();
});
test.after(() => {
  closePkcs11Modules();
  hsm.remove();
});

const env = (over: Record<string, string>) => ({ CTL_PKCS11_MODULE: SOFTHSM_MODULE, ...over });
const rootPem = () =>
  createPublicKey({ key: keys.root.publicJwk as never, format: 'jwk' })
    .export({ type: 'spki', format: 'pem' })
    .toString();

async function issue(t: TestAuthority) {
  const wallet = await generateKeyPair({ alg: 'EdDSA' });
  const r = await t.call('POST', '/grants', await grantRequest(t, wallet.publicJwk));
  assert.is(r.status, 201, JSON.stringify(r.body));
  return r.body;
}
const refusal = startRefusal;

// First, while no session of this process is logged in to the spare token (a token's login is
// shared by all of a process's sessions, so a wrong PIN is only seen by the first login).
test(
  'a wrong PIN or a missing key is a start-up error naming the variable, never a fall-back ' + 'to the stored key',
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ctl-hsm-auth-'));
    try {
      const dev = await startTestAuthority({ dir, keepDir: true }); // the database now holds a generated grant key
      await dev.close();
      const wrongPin = await refusal(() =>
        startTestAuthority({ dir, keepDir: true, env: env({ [GRANT_URI]: spareUri('grant', '9999') }) }),
      );
      assert.ok(wrongPin.startsWith(`${GRANT_URI}: `), wrongPin);
      assert.match(wrongPin, /CKR_PIN_INCORRECT/);
      assert.not.match(wrongPin, /\n/);
      const noKey = await refusal(() =>
        startTestAuthority({ dir, keepDir: true, env: env({ [ROOT_URI]: hsm.uri('no-such-root') }) }),
      );
      assert.ok(noKey.startsWith(`${ROOT_URI}: no private key match`), noKey);
      const noModule = await refusal(() =>
        startTestAuthority({
          dir,
          keepDir: true,
          env: { [GRANT_URI]: hsm.uri('grant-a'), CTL_PKCS11_MODULE: join(dir, 'missing.so') },
        }),
      );
      assert.ok(noModule.startsWith(`${GRANT_URI}: PKCS#11 module`), noModule);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

test('`ctl authority` with a wrong PIN exits non-zero with one line naming the variable', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ctl-hsm-cli-'));
  try {
    const childEnv = {
      ...process.env,
      PORT: '0',
      DATABASE_URL: `sqlite:${join(dir, 'a.db')}`,
      LOG_LEVEL: 'silent',
      CTL_PKCS11_MODULE: SOFTHSM_MODULE,
      [GRANT_URI]: spareUri('grant', '4321'),
    };
    const exit = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = execFile(
        process.execPath,
        [join(process.cwd(), 'bin', 'ctl.mjs'), 'authority'],
        { env: childEnv, timeout: 20_000 },
        (e, _out, stderr) => resolve({ code: e ? (typeof e.code === 'number' ? e.code : -1) : 0, stderr }),
      );
      child.stdin?.end();
    });
    assert.is(exit.code, 1);
    assert.is(exit.stderr.trim().split('\n').length, 1, exit.stderr);
    assert.match(
      exit.stderr,
      `ctl authority: ${GRANT_URI}: logging in to pkcs11:token=spare;object=grant?pin-value=***: ` +
        'the token refused the PIN (CKR_PIN_INCORRECT)',
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('SQLite: grants and bundles signed in the HSM verify; the database holds no private key of them', async () => {
  const t = await startTestAuthority({ env: env({ [GRANT_URI]: hsm.uri('grant-a'), [ROOT_URI]: hsm.uri('root') }) });
  try {
    const grant = await issue(t);
    assert.is(
      grant.keyId,
      await jwkThumbprint(keys['grant-a'].publicJwk as never),
      'kid: the thumbprint of the key in the token',
    );
    const jwks = (await t.call('GET', '/.well-known/ctl-keys.json', undefined, null)).body;
    assert.ok((await verifyPolicyGrant(grant, { jwks })).valid);
    const bundle = await t.call('POST', '/trust-bundles', {
      scope: {},
      expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
    });
    assert.is(bundle.status, 201);
    assert.ok((await verifyTrustBundle(bundle.body, rootPem())).valid, 'bundle signed by the root in the token');
    const rows = await t.authority.store.listSigningKeys();
    assert.equal(rows.map((r) => [r.purpose, r.source, r.privatePem]).sort(), [
      ['bundle', 'env', null],
      ['grant', 'env', null],
    ]);
  } finally {
    await t.close();
  }
});

test('a KEK inside the token (CTL_AUTHORITY_KEK_PKCS11_URI) seals the keys the authority generates', async () => {
  await generatePkcs11AesKey(hsm.uri('authority-kek'), { modulePath: SOFTHSM_MODULE });
  const dir = mkdtempSync(join(tmpdir(), 'ctl-hsm-kek-'));
  try {
    const kekEnv = env({ CTL_AUTHORITY_KEK_PKCS11_URI: hsm.uri('authority-kek') });
    const t = await startTestAuthority({ dir, keepDir: true, env: kekEnv });
    const rows = await t.authority.store.listSigningKeys();
    assert.is(rows.length, 2);
    for (const r of rows)
      assert.ok(r.privatePem!.startsWith('ctl-sealed/1.p11:authority-kek.'), r.privatePem!.slice(0, 40));
    const before = await issue(t);
    await t.close();
    const again = await startTestAuthority({ dir, keepDir: true, env: kekEnv });
    assert.is((await issue(again)).keyId, before.keyId, 'the stored key opens again through the token');
    await again.close();
    const other = await refusal(() => startTestAuthority({ dir, keepDir: true }));
    assert.match(other, /sealed under KEK p11:authority-kek, but CTL_AUTHORITY_KEK here is KEK/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test(
  'a token that stops answering after start: the grant is refused 503 unavailable, nothing ' + 'is signed elsewhere',
  async () => {
    const t = await startTestAuthority({ env: env({ [GRANT_URI]: hsm.uri('grant-a'), [ROOT_URI]: hsm.uri('root') }) });
    try {
      await issue(t);
      closePkcs11Modules(); // the library finalised under the signer: every call now fails
      const wallet = await generateKeyPair({ alg: 'EdDSA' });
      const r = await t.call('POST', '/grants', await grantRequest(t, wallet.publicJwk));
      assert.is(r.status, 503);
      assert.is(r.body.error.code, 'unavailable');
      assert.match(r.body.error.message, /token did not sign \(.+\)/, r.body.error.message);
    } finally {
      await t.close();
    }
  },
);

test(
  'PostgreSQL: two instances with different HSM grant keys both sign and publish both; ' + 'the root is one',
  async () => {
    if (!(await pgAvailable())) {
      console.log('SKIPPED: PostgreSQL unreachable');
      return;
    }
    const schema = freshSchema();
    const open = (grant: string) =>
      startTestAuthority({
        databaseUrl: PG_URL,
        schema,
        env: env({ [GRANT_URI]: hsm.uri(grant), [ROOT_URI]: hsm.uri('root') }),
      });
    const a = await open('grant-a');
    const b = await open('grant-b');
    try {
      const issued = [await issue(a), await issue(b), await issue(a)];
      assert.is.not(issued[0].keyId, issued[1].keyId);
      for (const t of [a, b]) {
        const jwks = (await t.call('GET', '/.well-known/ctl-keys.json', undefined, null)).body;
        assert.equal(
          jwks.keys.map((k: { status: string }) => k.status),
          ['active', 'active'],
        );
        for (const g of issued) assert.ok((await verifyPolicyGrant(g, { jwks })).valid, `${g.keyId} on ${t.url}`);
      }
      // A root from the token other than the stored one is refused (PROTOCOL.md §11), naming the URI variable.
      const other = await refusal(() =>
        startTestAuthority({
          databaseUrl: PG_URL,
          schema,
          env: env({ [GRANT_URI]: hsm.uri('grant-a'), [ROOT_URI]: hsm.uri('grant-b') }),
        }),
      );
      assert.ok(other.startsWith(`${ROOT_URI} is not the Trust Bundle root key stored in the database`), other);
    } finally {
      await a.close();
      await b.close();
      await dropSchema(schema);
    }
  },
);

test.run();
