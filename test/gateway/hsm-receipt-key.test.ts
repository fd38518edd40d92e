/**
 * The gateway's receipt key in an HSM (SoftHSM2, CTL_GATEWAY_RECEIPT_KEY_PKCS11_URI): receipts are
 * signed inside the token and verify against the JWKS; the database records the public half only;
 * an instance without the key, a wrong PIN, or a rotation through the API is refused by name.
 */
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSoftHsm, SOFTHSM_MODULE } from '../helpers/softhsm.js';
import { testsNeeding } from '../helpers/system-packages.js';
import { closePkcs11Modules, generatePkcs11Ed25519Key } from '../../service-kit/signers/index.js';
import { openDatabase, silentLogger } from '../../service-kit/index.js';
import { jwkThumbprint, verifyPolicyGrant, verifyReceipt, verifyTrustBundle, type PublicJwk } from '../../src/index.js';
import { createPublicKey } from 'node:crypto';
import { startGateway, type RunningGateway } from '../../gateway/server.js';
import { ADMIN_KEY, call, createSession, proxy, startMerchant } from './helpers.js';
import { startRefusal } from '../helpers/refused-start.js';

const test = testsNeeding('softhsm2', "the gateway's keys in a SoftHSM2 token");

const VAR = 'CTL_GATEWAY_RECEIPT_KEY_PKCS11_URI';
const hsm = createSoftHsm(['ctl', 'spare']);
let receiptJwk: PublicJwk;
const dir = mkdtempSync(join(tmpdir(), 'ctl-gw-hsm-'));

test.before(async () => {
  const s = await generatePkcs11Ed25519Key(hsm.uri('receipt'), { modulePath: SOFTHSM_MODULE });
  receiptJwk = s.publicJwk;
  await s.close();
  await (
    await generatePkcs11Ed25519Key(`pkcs11:token=spare;object=receipt?pin-value=${hsm.pin}`, {
      modulePath: SOFTHSM_MODULE,
    })
  ).close();
});
test.after(() => {
  closePkcs11Modules();
  hsm.remove();
  rmSync(dir, { recursive: true, force: true });
});

const start = (env: Record<string, string>, db = 'gateway.db') =>
  startGateway({
    port: 0,
    host: '127.0.0.1',
    databaseUrl: `sqlite:${join(dir, db)}`,
    adminKey: ADMIN_KEY,
    targets: { allowPrivate: true },
    logger: silentLogger(),
    env: { CTL_PKCS11_MODULE: SOFTHSM_MODULE, ...env },
  });
const refusal = (p: Promise<RunningGateway>) => startRefusal(() => p);

test('a wrong PIN stops the start with one line naming the variable', async () => {
  const m = await refusal(start({ [VAR]: `pkcs11:token=spare;object=receipt?pin-value=0000` }, 'wrong-pin.db'));
  assert.ok(m.startsWith(`${VAR}: `), m);
  assert.match(m, /CKR_PIN_INCORRECT/);
  assert.not.match(m, /\n/);
});

test('`ctl gateway` with a wrong PIN exits 1 with one line naming the variable', async () => {
  const { execFile } = await import('node:child_process');
  const env = {
    ...process.env,
    PORT: '0',
    DATABASE_URL: `sqlite:${join(dir, 'cli.db')}`,
    LOG_LEVEL: 'silent',
    CTL_PKCS11_MODULE: SOFTHSM_MODULE,
    [VAR]: `pkcs11:token=spare;object=receipt?pin-value=4321`,
  };
  const exit = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [join(process.cwd(), 'bin', 'ctl.mjs'), 'gateway'],
      { env, timeout: 20_000 },
      (e, _out, stderr) => resolve({ code: e ? (typeof e.code === 'number' ? e.code : -1) : 0, stderr }),
    );
  });
  assert.is(exit.code, 1);
  assert.is(exit.stderr.trim().split('\n').length, 1, exit.stderr);
  assert.match(
    exit.stderr,
    `ctl gateway: ${VAR}: logging in to pkcs11:token=spare;object=receipt?pin-value=***: ` +
      'the token refused the PIN (CKR_PIN_INCORRECT)',
  );
});

test('receipts are signed in the token and verify against the JWKS; only the public half is stored', async () => {
  const running = await start({ [VAR]: hsm.uri('receipt') });
  const merchant = await startMerchant({ amount: '100' });
  try {
    const url = running.server.url;
    const owner = await call(url, 'POST', '/admin/owners', { key: ADMIN_KEY, body: { label: 'hsm' } });
    const gw = { url, ownerKey: owner.body.apiKey as string } as never;
    const s = await createSession(gw);
    const paid = await proxy(gw, s.sessionToken, `${merchant.url}/x`, { purpose: 'api:search' });
    assert.is(paid.status, 200, paid.text);
    const receipt = (await call(url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: owner.body.apiKey })).body
      .receipts[0];
    assert.is(receipt.keyId, await jwkThumbprint(receiptJwk));
    const jwks = (await call(url, 'GET', '/.well-known/ctl-keys.json')).body;
    assert.ok((await verifyReceipt(receipt, { jwks })).valid);
    const row = await openDatabase(`sqlite:${join(dir, 'gateway.db')}`);
    const stored = await row.all<{ purpose: string; status: string; custody: string; private_pem: string }>(
      `SELECT purpose, status, custody, private_pem FROM gw_keys ORDER BY purpose`,
    );
    await row.close();
    assert.equal(
      stored.map((k) => [k.purpose, k.status, k.custody, k.private_pem === '' ? '' : 'sealed']),
      [
        ['bundle', 'active', 'database', 'sealed'],
        ['grant', 'active', 'database', 'sealed'],
        ['receipt', 'active', 'pkcs11', ''],
      ],
      'no stored receipt key was generated only to be retired',
    );
    const rotate = await call(url, 'POST', '/admin/keys/rotate', { key: ADMIN_KEY, body: { purpose: 'receipt' } });
    assert.is(rotate.status, 409);
    assert.match(rotate.body.error.message, VAR);
  } finally {
    await merchant.close();
    await running.close();
  }
});

test('all three gateway keys in the token: grants, receipts and the Trust Bundle are signed there', async () => {
  const pub: Record<string, PublicJwk> = {};
  for (const purpose of ['grant', 'bundle']) {
    const k = await generatePkcs11Ed25519Key(hsm.uri(`gw-${purpose}`), { modulePath: SOFTHSM_MODULE });
    pub[purpose] = k.publicJwk;
    await k.close();
  }
  const running = await start(
    {
      CTL_GATEWAY_GRANT_KEY_PKCS11_URI: hsm.uri('gw-grant'),
      [VAR]: hsm.uri('receipt'),
      CTL_GATEWAY_BUNDLE_KEY_PKCS11_URI: hsm.uri('gw-bundle'),
    },
    'all-hsm.db',
  );
  try {
    const url = running.server.url;
    const owner = await call(url, 'POST', '/admin/owners', { key: ADMIN_KEY, body: { label: 'hsm' } });
    const s = await createSession({ url, ownerKey: owner.body.apiKey } as never);
    const root = (await call(url, 'GET', '/.well-known/ctl-bundle-root.json')).body.keys[0];
    assert.is(root.x, pub.bundle.x);
    const bundle = (await call(url, 'GET', '/.well-known/ctl-trust-bundle.json')).body;
    const rootPem = createPublicKey({ key: pub.bundle as never, format: 'jwk' })
      .export({ type: 'spki', format: 'pem' })
      .toString();
    assert.ok((await verifyTrustBundle(bundle, rootPem)).valid, 'bundle signed by the bundle key in the token');
    const jwks = (await call(url, 'GET', '/.well-known/ctl-keys.json')).body;
    const grantKey = jwks.keys.find(
      (k: { purposes: string[]; status: string }) => k.purposes[0] === 'grant' && k.status === 'active',
    );
    assert.is(grantKey.x, pub.grant.x);
    const db = await openDatabase(`sqlite:${join(dir, 'all-hsm.db')}`);
    const grant = JSON.parse(
      (await db.get<{ grant_json: string }>(`SELECT grant_json FROM gw_sessions WHERE id = ?`, [s.sessionId]))!
        .grant_json,
    );
    assert.equal(
      (await db.all<{ custody: string }>(`SELECT DISTINCT custody FROM gw_keys WHERE status = 'active'`)).map(
        (r) => r.custody,
      ),
      ['pkcs11'],
    );
    await db.close();
    assert.ok(
      (await verifyPolicyGrant(grant, { jwks })).valid,
      'the session grant was signed by the grant key in the token',
    );
  } finally {
    await running.close();
  }
});

test('an instance without the HSM receipt key on that database is refused, naming the variable', async () => {
  const m = await refusal(start({}));
  assert.match(
    m,
    new RegExp(
      "the receipt key '.+' is held outside the database and not by this instance: " +
        'set CTL_GATEWAY_RECEIPT_KEY_PKCS11_URI',
    ),
  );
});

test.run();
