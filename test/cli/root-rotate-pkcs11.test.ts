/**
 * `ctl root rotate` with root keys in a PKCS#11 token (SoftHSM2), through the real binary: the
 * version-1 root made by `ctl root init --pkcs11` signs the statement inside the token (its
 * directory's root.json records the URI, the PIN comes from --pin-source), the new root set mixes
 * a key directory and a token key (--to-pkcs11), the bundle key is a token key
 * (--bundle-key-pkcs11); the next rotation signs with --from-pkcs11. A wrong PIN or a missing PIN
 * writes nothing; unknown flags exit 2.
 */
import * as assert from 'uvu/assert';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSoftHsm, SOFTHSM_MODULE } from '../helpers/softhsm.js';
import { testsNeeding } from '../helpers/system-packages.js';
import { closePkcs11Modules, generatePkcs11Key } from '../../service-kit/signers/index.js';
import { jwkThumbprint, verifyRootChain, type PublicJwk } from '../../src/index.js';
import { runCtl } from '../helpers/run-ctl.js';

const test = testsNeeding('softhsm2', '`ctl root rotate` with keys in a SoftHSM2 token');

const hsm = createSoftHsm(['fleet']); // sets SOFTHSM2_CONF, inherited by every ctl below
const dir = mkdtempSync(join(tmpdir(), 'ctl-rotate-p11-'));
const f = (name: string) => join(dir, name);
const noPin = (object: string) => `pkcs11:token=fleet;object=${object}`;
const pinFile = f('pin');
const wrongPinFile = f('wrong-pin');
let bundleJwk: PublicJwk;

const ctl = (...args: string[]) => runCtl({ cwd: dir, env: { CTL_PKCS11_MODULE: SOFTHSM_MODULE } }, ...args);
const chainText = () => (existsSync(f('chain.json')) ? readFileSync(f('chain.json'), 'utf8') : undefined);

test.before(async () => {
  writeFileSync(pinFile, `${hsm.pin}\n`, { mode: 0o600 });
  writeFileSync(wrongPinFile, '9999\n', { mode: 0o600 });
  const bundle = await generatePkcs11Key(hsm.uri('bundle-2'), { modulePath: SOFTHSM_MODULE });
  bundleJwk = bundle.publicJwk;
  await bundle.close();
  const r2b = await generatePkcs11Key(hsm.uri('root-2b'), { modulePath: SOFTHSM_MODULE });
  await r2b.close();
  closePkcs11Modules();
  // Manufacturing: the version-1 root generated in the token; root.json keeps the URI, not the PIN.
  const init = await ctl('root', 'init', '--pkcs11', hsm.uri('root-1'), '--out', f('v1'));
  assert.is(init.code, 0, init.err);
  const meta = JSON.parse(readFileSync(f('v1/root.json'), 'utf8'));
  assert.is(meta.pkcs11, noPin('root-1'));
  assert.not.ok(existsSync(f('v1/root.key.pem')));
  for (const d of ['v2a', 'v3']) assert.is((await ctl('root', 'init', '--out', f(d))).code, 0);
});
test.after(() => {
  closePkcs11Modules();
  hsm.remove();
  rmSync(dir, { recursive: true, force: true });
});

const rotate1to2 = (pin: string[]) =>
  ctl(
    'root',
    'rotate',
    '--chain',
    f('chain.json'),
    '--from',
    f('v1'),
    ...pin,
    '--to',
    f('v2a'),
    '--to-pkcs11',
    noPin('root-2b'),
    '--threshold',
    '2',
    '--bundle-key-pkcs11',
    noPin('bundle-2'),
  );

test('no PIN, or a wrong one: exit 1 naming the key, nothing written', async () => {
  const none = await rotate1to2([]);
  assert.is(none.code, 1, none.out + none.err);
  assert.match(none.err, /--from .*v1 pkcs11:token=fleet;object=root-1: no private key match.*no PIN given/);
  const wrong = await rotate1to2(['--pin-source', wrongPinFile]);
  assert.is(wrong.code, 1, wrong.out + wrong.err);
  assert.match(wrong.err, /CKR_PIN_INCORRECT/);
  assert.is(chainText(), undefined);
});

test('1 → 2: the version-1 root signs inside the token; the chain verifies from its public PEM', async () => {
  const r = await rotate1to2(['--pin-source', pinFile]);
  assert.is(r.code, 0, r.out + r.err);
  const chain = JSON.parse(chainText()!);
  const pinned = readFileSync(f('v1/root.pub.pem'), 'utf8');
  assert.is(chain.pinnedRootPem, pinned);
  const v = await verifyRootChain(pinned, chain.statements);
  assert.ok(v.valid, JSON.stringify(v));
  if (!v.valid) return;
  assert.is(v.rootVersion, 2);
  assert.is(v.threshold, 2);
  assert.equal(
    v.bundleKeys.map((k) => k.kid),
    [await jwkThumbprint(bundleJwk)],
  );
  const v1Kid = JSON.parse(readFileSync(f('v1/root.json'), 'utf8')).kid;
  const signedBy = chain.statements[0].signatures.map((s: { keyId: string }) => s.keyId);
  assert.ok(signedBy.includes(v1Kid), 'signed by the root in the token');
  assert.is(signedBy.length, 3, 'the old root and both new keys (proof of possession)');
});

test('2 → 3: short of the version-2 threshold without the token key; --from-pkcs11 brings it', async () => {
  const before = chainText();
  const short = await ctl('root', 'rotate', '--chain', f('chain.json'), '--from', f('v2a'), '--to', f('v3'));
  assert.is(short.code, 1, short.out + short.err);
  assert.match(short.err, /root_rotation_invalid/);
  assert.is(chainText(), before, 'nothing appended');
  const r = await ctl(
    'root',
    'rotate',
    '--chain',
    f('chain.json'),
    '--from',
    f('v2a'),
    '--from-pkcs11',
    `${noPin('root-2b')}?pin-source=${pinFile}`,
    '--to',
    f('v3'),
  );
  assert.is(r.code, 0, r.out + r.err);
  const chain = JSON.parse(chainText()!);
  const v = await verifyRootChain(readFileSync(f('v1/root.pub.pem'), 'utf8'), chain.statements);
  assert.ok(v.valid && v.rootVersion === 3, JSON.stringify(v));
});

test('--help names the token forms; an unknown flag or a bad URI exits 2', async () => {
  const help = await ctl('root', 'rotate', '--help');
  assert.is(help.code, 0);
  for (const flag of ['--from-pkcs11', '--to-pkcs11', '--bundle-key-pkcs11', '--pin-source', '--module'])
    assert.ok(help.out.includes(flag), flag);
  const unknown = await ctl('root', 'rotate', '--chain', f('x.json'), '--from-pkcs', noPin('root-1'), '--to', f('v3'));
  assert.is(unknown.code, 2);
  assert.match(unknown.err, /unknown option --from-pkcs\b/);
  const bad = await ctl(
    'root',
    'rotate',
    '--chain',
    f('x.json'),
    '--from-pkcs11',
    'pkcs11:token=fleet;bogus=1',
    '--to',
    f('v3'),
  );
  assert.is(bad.code, 2);
  assert.match(bad.err, /--from-pkcs11: pkcs11 URI: unknown attribute 'bogus'/);
});

test.run();
