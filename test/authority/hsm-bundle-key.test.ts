/**
 * The authority's bundle key in an HSM (PROTOCOL.md §11): after a root rotation whose bundleKeys
 * list a key generated in a SoftHSM2 token, the authority started with
 * CTL_TRUST_BUNDLE_SIGNING_KEY_PKCS11_URI signs bundles that a device following the chain
 * accepts. A wrong PIN, a key the newest statement does not list, or two sources for the key stop
 * the start with one line naming the variable, never a fall-back.
 */
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSoftHsm, SOFTHSM_MODULE } from '../helpers/softhsm.js';
import { testsNeeding } from '../helpers/system-packages.js';
import { closePkcs11Modules, generatePkcs11Key } from '../../service-kit/signers/index.js';
import {
  createRootStatement,
  generateKeyPair,
  jwkThumbprint,
  verifyTrustBundle,
  type GeneratedKeyPair,
  type PublicJwk,
  type RootStatement,
} from '../../src/index.js';
import { startTestAuthority, type TestAuthority } from './harness.js';
import { startRefusal } from '../helpers/refused-start.js';

const test = testsNeeding('softhsm2', "the authority's bundle key in a SoftHSM2 token");

const URI_VAR = 'CTL_TRUST_BUNDLE_SIGNING_KEY_PKCS11_URI';
const hsm = createSoftHsm(['ctl', 'spare']);
const spareUri = (object: string, pin = hsm.pin) => `pkcs11:token=spare;object=${object}?pin-value=${pin}`;
const dir = mkdtempSync(join(tmpdir(), 'ctl-hsm-bundle-'));
let root1: GeneratedKeyPair;
let s2: RootStatement;
let bundleJwk: PublicJwk;

const refusal = (env: Record<string, string>) =>
  startRefusal(() => startTestAuthority({ dir, keepDir: true, env: { CTL_PKCS11_MODULE: SOFTHSM_MODULE, ...env } }));

test.before(async () => {
  const inToken = await generatePkcs11Key(hsm.uri('bundle-2'), { modulePath: SOFTHSM_MODULE });
  bundleJwk = inToken.publicJwk;
  await inToken.close();
  const spare = await generatePkcs11Key(spareUri('bundle-2'), { modulePath: SOFTHSM_MODULE });
  await spare.close();
  // Version 1: the authority's root; version 2 names the token's key as its only bundle key.
  root1 = await generateKeyPair({ alg: 'EdDSA' });
  const r2 = await generateKeyPair({ alg: 'EdDSA' });
  s2 = await createRootStatement(
    { rootVersion: 2, keys: [r2.publicJwk], threshold: 1, bundleKeys: [bundleJwk] },
    { signers: [{ key: root1.privateKeyPem }, { key: r2.privateKeyPem }] },
  );
  const v1 = await startTestAuthority({
    dir,
    keepDir: true,
    env: { CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_PEM: root1.privateKeyPem },
  });
  const published = await v1.call('POST', '/trust-root', { statement: s2 });
  assert.is(published.status, 201, JSON.stringify(published.body));
  await v1.close();
});
test.after(() => {
  closePkcs11Modules();
  hsm.remove();
  rmSync(dir, { recursive: true, force: true });
});

// First, while no session of this process is logged in to the spare token (a login is shared by a process's sessions).
test('a wrong PIN is a one-line start-up error naming the variable, not a start without a bundle key', async () => {
  const msg = await refusal({ [URI_VAR]: spareUri('bundle-2', '9999') });
  assert.ok(msg.startsWith(`${URI_VAR}: `), msg);
  assert.match(msg, /CKR_PIN_INCORRECT/);
  assert.not.match(msg, /\n|9999/);
});

test('an unreachable token (no such module) is refused naming the variable', async () => {
  const msg = await refusal({ [URI_VAR]: hsm.uri('bundle-2'), CTL_PKCS11_MODULE: join(dir, 'missing.so') });
  assert.ok(msg.startsWith(`${URI_VAR}: PKCS#11 module`), msg);
});

test('the URI and a PEM (or a file) at once are refused naming both', async () => {
  const pem = (await generateKeyPair({ alg: 'EdDSA' })).privateKeyPem;
  assert.match(
    await refusal({ [URI_VAR]: hsm.uri('bundle-2'), CTL_TRUST_BUNDLE_SIGNING_KEY_PEM: pem }),
    `${URI_VAR} and CTL_TRUST_BUNDLE_SIGNING_KEY_PEM: set one, not both`,
  );
  writeFileSync(join(dir, 'k.pem'), pem, { mode: 0o600 });
  assert.match(
    await refusal({ [URI_VAR]: hsm.uri('bundle-2'), CTL_TRUST_BUNDLE_SIGNING_KEY_FILE: join(dir, 'k.pem') }),
    `${URI_VAR} and CTL_TRUST_BUNDLE_SIGNING_KEY_FILE: set one, not both`,
  );
});

test('a token key the newest root statement does not list is refused naming the URI variable', async () => {
  const other = await generatePkcs11Key(hsm.uri('not-listed'), { modulePath: SOFTHSM_MODULE });
  await other.close();
  const msg = await refusal({ [URI_VAR]: hsm.uri('not-listed') });
  assert.ok(msg.startsWith(`${URI_VAR} is not one of the bundleKeys of root version 2`), msg);
});

test(
  'bundles signed by the bundle key in the token verify through the chain from the pinned ' + 'version-1 root',
  async () => {
    const t = await startTestAuthority({
      dir,
      keepDir: true,
      env: { CTL_PKCS11_MODULE: SOFTHSM_MODULE, [URI_VAR]: hsm.uri('bundle-2') },
    });
    try {
      const r = await t.call('POST', '/trust-bundles', {
        scope: { region: 'eu' },
        expiresAt: new Date(Date.now() + 3600_000).toISOString(),
      });
      assert.is(r.status, 201, JSON.stringify(r.body));
      const rootChain = (await t.call('GET', '/trust-root', undefined, null)).body.statements;
      const ok = await verifyTrustBundle(r.body, root1.publicKeyPem, { rootChain });
      assert.ok(ok.valid, JSON.stringify(ok));
      assert.is(
        JSON.stringify(r.body).includes(await jwkThumbprint(bundleJwk)),
        true,
        'signed under the kid of the key in the token',
      );
      // Without the chain the same bundle is not the root's: it was signed by the token's key.
      assert.not.ok((await verifyTrustBundle(r.body, root1.publicKeyPem)).valid);
    } finally {
      await t.close();
    }
  },
);

test.run();
