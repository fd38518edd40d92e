/**
 * `ctl root init --pkcs11 <uri>` (manufacturing): the root is generated inside the token
 * (SoftHSM2), only its public half is written, and the authority signs Trust Bundles with it
 * through CTL_TRUST_BUNDLE_ROOT_KEY_PKCS11_URI: they verify against the exported PEM.
 */
import * as assert from 'uvu/assert';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createSoftHsm, SOFTHSM_MODULE } from '../helpers/softhsm.js';
import { testsNeeding } from '../helpers/system-packages.js';
import { closePkcs11Modules } from '../../service-kit/signers/index.js';
import { jwkThumbprint, verifyTrustBundle } from '../../src/index.js';
import { startTestAuthority } from '../authority/harness.js';
import { runCtl } from '../helpers/run-ctl.js';

const test = testsNeeding('softhsm2', '`ctl root init --pkcs11` (a root made in a SoftHSM2 token)');

const hsm = createSoftHsm(['factory']);
const pinFile = join(hsm.dir, 'pin');
writeFileSync(pinFile, `${hsm.pin}\n`, { mode: 0o600 });
const uri = (label: string) => `pkcs11:token=factory;object=${label}?pin-source=${pinFile}`;
test.after(() => {
  closePkcs11Modules();
  hsm.remove();
});

const ctl = (...args: string[]) => runCtl({ cwd: hsm.dir, env: { CTL_PKCS11_MODULE: SOFTHSM_MODULE } }, ...args);

test(
  'the root is made in the token, the public half exported, and bundles the authority ' + 'signs with it verify',
  async () => {
    const out = join(hsm.dir, 'fleet-root');
    const r = await ctl('root', 'init', '--pkcs11', uri('root-2026'), '--out', out);
    assert.is(r.code, 0, r.err);
    assert.equal(readdirSync(out).sort(), ['root.json', 'root.pub.pem'], 'no private key file');
    const meta = JSON.parse(readFileSync(join(out, 'root.json'), 'utf8'));
    assert.is(meta.pkcs11, uri('root-2026'));
    assert.is(meta.kid, await jwkThumbprint(meta.publicJwk));
    assert.match(r.out, /never leaves it/);
    const pem = readFileSync(join(out, 'root.pub.pem'), 'utf8');

    const t = await startTestAuthority({
      env: { CTL_TRUST_BUNDLE_ROOT_KEY_PKCS11_URI: uri('root-2026'), CTL_PKCS11_MODULE: SOFTHSM_MODULE },
    });
    try {
      const b = await t.call('POST', '/trust-bundles', {
        scope: {},
        expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
      });
      assert.is(b.status, 201);
      assert.ok(
        (await verifyTrustBundle(b.body, pem)).valid,
        'signed in the token, verified against the provisioned PEM',
      );
    } finally {
      await t.close();
    }
  },
);

test(
  'without --out the public PEM goes to stdout; a label already in the token is refused; ' + 'a PIN is never written',
  async () => {
    const r = await ctl('root', 'init', '--pkcs11', `pkcs11:token=factory;object=line-7?pin-value=${hsm.pin}`);
    assert.is(r.code, 0, r.err);
    assert.match(r.out, /^-----BEGIN PUBLIC KEY-----/);
    const again = await ctl('root', 'init', '--pkcs11', uri('line-7'), '--out', join(hsm.dir, 'x'));
    assert.is(again.code, 1);
    assert.match(again.err, /already holds a key labelled 'line-7'/);
    assert.not.ok(existsSync(join(hsm.dir, 'x', 'root.json')));
    const out = join(hsm.dir, 'with-pin');
    assert.is(
      (await ctl('root', 'init', '--pkcs11', `pkcs11:token=factory;object=line-8?pin-value=${hsm.pin}`, '--out', out))
        .code,
      0,
    );
    assert.not.match(readFileSync(join(out, 'root.json'), 'utf8'), /pin-value/);
  },
);

test('a wrong PIN is one line; --force and an unknown --alg are usage errors with --pkcs11', async () => {
  const r = await ctl('root', 'init', '--pkcs11', 'pkcs11:token=factory;object=z?pin-value=0000');
  assert.is(r.code, 1);
  assert.match(r.err, /^ctl root: logging in to .*CKR_PIN_INCORRECT\)\n$/);
  assert.is((await ctl('root', 'init', '--pkcs11', uri('y'), '--force')).code, 2);
  assert.is((await ctl('root', 'init', '--pkcs11', uri('y'), '--alg', 'RSA')).code, 2);
  const es = await ctl('root', 'init', '--pkcs11', uri('p256-root'), '--alg', 'ES256');
  assert.is(es.code, 0, es.err);
  assert.match(es.err, /\(ES256\) generated/);
});

test.run();
