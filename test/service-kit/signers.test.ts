/** Signers (service-kit/signers): RFC 7512 URIs, the file signer, and PKCS#11 against SoftHSM2. */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createPublicKey, verify } from 'node:crypto';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createHsm } from './signers-fixture.js';
import { testsNeeding } from '../helpers/system-packages.js';
import {
  closePkcs11Modules,
  fileSigner,
  generatePkcs11Ed25519Key,
  generatePkcs11Key,
  openPkcs11Signer,
  parsePkcs11Uri,
  signerFromEnv,
  signingOffThread,
  ed25519KeyObject,
} from '../../service-kit/signers/index.js';
import {
  canonicalize,
  createSignedPolicyGrant,
  formatTimestamp,
  generateKeyPair,
  importSigningKey,
  policyHash,
  verifyWithJwk,
  type PublicJwk,
  type SigningKey,
} from '../../src/index.js';
import { randomId, timeOrderedId } from '../../service-kit/index.js';
import { readVectorJson } from '../helpers/vectors.js';

const hsm = createHsm();
const hsmTest = testsNeeding('softhsm2', 'the PKCS#11 signer against a SoftHSM2 token');
const nodeVerifies = (jwk: object, msg: Uint8Array, sig: Uint8Array) =>
  verify(null, msg, createPublicKey({ key: { ...jwk } as never, format: 'jwk' }), sig);
/**
 * Signs a grant with `signingKey` through the SDK and checks the signature with node:crypto over
 * the bytes PROTOCOL.md §3 names (`ctl-grant/1\n` + JCS without the signature).
 */
async function grantSignedByVerifies(signingKey: SigningKey, actorKey: PublicJwk, issuer: string): Promise<boolean> {
  const g = await createSignedPolicyGrant(
    {
      policyHash: policyHash({ a: 1 }),
      actorKey,
      allowedRails: ['x402'],
      allowedAssets: [{ standard: 'iso4217', code: 'USD' }],
      maxAmountMinor: '100',
      currency: 'USD',
      expiresAt: formatTimestamp(Date.now() + 3600_000),
    },
    { issuer, keyId: 'k1', signingKey, revocationBaseUrl: `https://${issuer}` },
  );
  const { signature, ...body } = g as unknown as Record<string, unknown>;
  return nodeVerifies(
    signingKey.publicJwk,
    new TextEncoder().encode(`ctl-grant/1\n${canonicalize(body)}`),
    Buffer.from(signature as string, 'base64url'),
  );
}
const refused = async (p: Promise<unknown>): Promise<string> => {
  try {
    await p;
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('expected a refusal');
};

test.after(() => {
  closePkcs11Modules();
  hsm.remove();
});

test('parsePkcs11Uri: RFC 7512 path and query attributes, percent-decoded', () => {
  const u = parsePkcs11Uri(
    'pkcs11:token=My%20HSM;object=grant;id=%01%02;type=private?pin-source=file:///run/pin&module-path=/usr/lib/x.so',
  );
  assert.is(u.token, 'My HSM');
  assert.is(u.object, 'grant');
  assert.equal([...u.id!], [1, 2]);
  assert.is(u.type, 'private');
  assert.is(u.pinSource, 'file:///run/pin');
  assert.is(u.modulePath, '/usr/lib/x.so');
  assert.is(parsePkcs11Uri('pkcs11:token=a?pin-value=secret').redacted, 'pkcs11:token=a?pin-value=***');
  for (const [bad, why] of [
    ['token=ctl', 'pkcs11:'],
    ['pkcs11:tokn=ctl', "unknown attribute 'tokn'"],
    ['pkcs11:token=a;token=b', 'twice'],
    ['pkcs11:token=a?pin-value=1&pin-source=/x', 'not both'],
    ['pkcs11:object=a%2', 'percent'],
    ['pkcs11:object=a b', 'percent-encoded'],
    ['pkcs11:type=secret', 'type'],
  ]) {
    assert.throws(
      () => parsePkcs11Uri(bad),
      (e: Error) => e.message.includes(why),
      bad,
    );
  }
  assert.not.ok(
    /1234/.test(
      String(
        (() => {
          try {
            parsePkcs11Uri('pkcs11:pin-value=1234');
          } catch (e) {
            return (e as Error).message;
          }
        })(),
      ),
    ),
    'a PIN is never echoed',
  );
});

hsmTest('a key generated in SoftHSM signs, node:crypto verifies, and its private half cannot be read', async () => {
  const s = await generatePkcs11Ed25519Key(hsm.uri('root-a'), { modulePath: hsm.module });
  assert.is(s.custody, 'pkcs11');
  assert.is(s.alg, 'EdDSA');
  const msg = new TextEncoder().encode('ctl-bundle/1\n{}');
  const sig = await s.sign(msg);
  assert.is(sig.length, 64);
  assert.ok(nodeVerifies(s.publicJwk, msg, sig));
  assert.ok(await verifyWithJwk(s.publicJwk, msg, sig), 'the SDK verifier agrees');
  assert.not.ok(nodeVerifies(s.publicJwk, new TextEncoder().encode('other'), sig));
  // The same key, opened again by its URI (another process would do this): same public key.
  const again = await openPkcs11Signer(hsm.uri('root-a'), { modulePath: hsm.module });
  assert.equal(again.publicJwk, s.publicJwk);
  assert.is(hsm.readPrivateValue('root-a'), 'CKR_ATTRIBUTE_SENSITIVE');
  await s.close();
  await again.close();
});

hsmTest('a PKCS#11 signer is an SDK SigningKey: an artifact signed by it verifies', async () => {
  const s = await generatePkcs11Ed25519Key(hsm.uri('grant-a'), { modulePath: hsm.module });
  const actor = await generateKeyPair({ alg: 'EdDSA' });
  assert.ok(await grantSignedByVerifies(s, actor.publicJwk, 'hsm.test'));
  await s.close();
});

hsmTest('ES256 in the token (for HSMs without EdDSA): signatures are raw r‖s, low-S, and verify', async () => {
  const s = await generatePkcs11Key(hsm.uri('p256'), { modulePath: hsm.module, alg: 'ES256' });
  assert.is(s.alg, 'ES256');
  assert.is(s.publicJwk.crv, 'P-256');
  const pub = createPublicKey({ key: { ...s.publicJwk } as never, format: 'jwk' });
  const half = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n / 2n;
  for (let i = 0; i < 40; i++) {
    const msg = new TextEncoder().encode(`p256 message ${i}`);
    const sig = await s.sign(msg);
    assert.is(sig.length, 64);
    assert.ok(BigInt(`0x${Buffer.from(sig.subarray(32)).toString('hex')}`) <= half, 'low-S');
    assert.ok(verify('sha256', msg, { key: pub, dsaEncoding: 'ieee-p1363' }, sig));
    assert.ok(await verifyWithJwk(s.publicJwk, msg, sig), 'the SDK verifier agrees');
  }
  const again = await openPkcs11Signer(hsm.uri('p256'), { modulePath: hsm.module });
  assert.equal(again.publicJwk, s.publicJwk);
  await again.close();
  await s.close();
});

hsmTest('concurrent signatures each get a session of their own and all verify', async () => {
  const s = await generatePkcs11Ed25519Key(hsm.uri('busy'), { modulePath: hsm.module });
  const msgs = Array.from({ length: 40 }, (_, i) => new TextEncoder().encode(`message ${i}`));
  const sigs = await Promise.all(msgs.map((m) => s.sign(m)));
  sigs.forEach((sig, i) => assert.ok(nodeVerifies(s.publicJwk, msgs[i], sig), `signature ${i}`));
  // Sustained: 16 callers, 1 500 signatures on the thread pool (the module must be initialised
  // for OS locking, else this corrupts the heap), every one checked.
  let bad = 0;
  await Promise.all(
    Array.from({ length: 16 }, async (_, w) => {
      for (let i = 0; i < 94; i++) {
        const m = new TextEncoder().encode(`worker ${w} message ${i}`);
        if (!nodeVerifies(s.publicJwk, m, await s.sign(m))) bad++;
      }
    }),
  );
  assert.is(bad, 0);
  await s.close();
  assert.match(await refused(s.sign(msgs[0])), /closed/);
});

hsmTest(
  'signerFromEnv: a wrong PIN, an absent token or key, or a module that cannot load ' +
    'is one line naming the variable',
  async () => {
    await (await generatePkcs11Ed25519Key(hsm.uri('named'), { modulePath: hsm.module })).close();
    const V = 'CTL_POLICY_GRANT_SIGNING_KEY_PKCS11_URI';
    const env = (uri: string, module = hsm.module) => ({ [V]: uri, CTL_PKCS11_MODULE: module });
    const wrongPin = await refused(
      signerFromEnv(env(`pkcs11:token=${hsm.label};object=named?pin-value=9999`), 'CTL_POLICY_GRANT_SIGNING'),
    );
    assert.ok(wrongPin.startsWith(`${V}: `), wrongPin);
    assert.match(wrongPin, /CKR_PIN_INCORRECT/);
    assert.not.match(wrongPin, /9999/);
    assert.not.match(wrongPin, /\n/);
    assert.match(
      await refused(
        signerFromEnv(env(`pkcs11:token=nope;object=named?pin-value=${hsm.pin}`), 'CTL_POLICY_GRANT_SIGNING'),
      ),
      /^CTL_POLICY_GRANT_SIGNING_KEY_PKCS11_URI: no PKCS#11 token matches .*tokens present: 'ctl'/,
    );
    assert.match(
      await refused(signerFromEnv(env(hsm.uri('absent')), 'CTL_POLICY_GRANT_SIGNING')),
      /^CTL_POLICY_GRANT_SIGNING_KEY_PKCS11_URI: no private key match/,
    );
    assert.match(
      await refused(signerFromEnv(env(hsm.uri('named'), '/nonexistent/libpkcs11.so'), 'CTL_POLICY_GRANT_SIGNING')),
      /^CTL_POLICY_GRANT_SIGNING_KEY_PKCS11_URI: PKCS#11 module '\/nonexistent\/libpkcs11.so' cannot be loaded/,
    );
    const pinFile = join(hsm.dir, 'pin');
    writeFileSync(pinFile, `${hsm.pin}\n`, { mode: 0o600 });
    const ok = await signerFromEnv(
      env(`pkcs11:token=${hsm.label};object=named?pin-source=${pinFile}`),
      'CTL_POLICY_GRANT_SIGNING',
    );
    assert.is(ok?.variable, V);
    assert.is(ok?.signer.custody, 'pkcs11');
    await ok?.signer.close();
    const pair = await generateKeyPair({ alg: 'EdDSA' });
    assert.match(
      await refused(
        signerFromEnv(
          { [V]: hsm.uri('named'), CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_PEM: pair.privateKeyPem },
          'CTL_POLICY_GRANT_SIGNING',
        ),
      ),
      /both set/,
    );
    assert.is(await signerFromEnv({}, 'CTL_POLICY_GRANT_SIGNING'), undefined);
  },
);

hsmTest('a wrong PIN is refused even while this process is logged in to the token with the right one', async () => {
  const s = await generatePkcs11Ed25519Key(hsm.uri('logged-in'), { modulePath: hsm.module });
  try {
    const m = await refused(
      openPkcs11Signer(`pkcs11:token=${hsm.label};object=logged-in?pin-value=9999`, { modulePath: hsm.module }),
    );
    assert.match(m, /logged in to that token with another PIN/);
    assert.not.match(m, /9999/);
    const same = await openPkcs11Signer(hsm.uri('logged-in'), { modulePath: hsm.module });
    await same.close();
  } finally {
    await s.close();
  }
});

test('signerFromEnv(prefix) reads process.env', async () => {
  const pair = await generateKeyPair({ alg: 'EdDSA' });
  process.env.CTL_TEST_SIGNER_PRIVATE_KEY_PEM = pair.privateKeyPem;
  try {
    assert.equal((await signerFromEnv('CTL_TEST_SIGNER'))?.signer.publicJwk, pair.publicJwk);
  } finally {
    delete process.env.CTL_TEST_SIGNER_PRIVATE_KEY_PEM;
  }
});

hsmTest('generating under a label already in the token is refused (a key is never overwritten)', async () => {
  await (await generatePkcs11Ed25519Key(hsm.uri('once'), { modulePath: hsm.module })).close();
  assert.match(
    await refused(generatePkcs11Ed25519Key(hsm.uri('once'), { modulePath: hsm.module })),
    /already holds a key labelled 'once'/,
  );
});

test('file signer: same signatures as the PEM, refused when others may read the file', async () => {
  const pair = await generateKeyPair({ alg: 'EdDSA' });
  const path = join(hsm.dir, 'grant.key.pem');
  writeFileSync(path, pair.privateKeyPem, { mode: 0o600 });
  const s = await fileSigner(path);
  assert.is(s.custody, 'file');
  assert.equal(s.publicJwk, pair.publicJwk);
  const msg = new TextEncoder().encode('x');
  assert.ok(nodeVerifies(pair.publicJwk, msg, await s.sign(msg)));
  chmodSync(path, 0o644);
  assert.match(await refused(fileSigner(path)), /accessible by others \(mode 644\)/);
  const viaEnv = await refused(signerFromEnv({ CTL_GATEWAY_RECEIPT_PRIVATE_KEY_FILE: path }, 'CTL_GATEWAY_RECEIPT'));
  assert.ok(viaEnv.startsWith('CTL_GATEWAY_RECEIPT_PRIVATE_KEY_FILE: '), viaEnv);
});

test(
  'signingOffThread: the same Ed25519 signature as the key signing on the loop, from ' +
    'a seed or a PEM; another key is refused',
  async () => {
    const pair = await generateKeyPair({ alg: 'EdDSA' });
    const onLoop = await importSigningKey(pair.privateKeyPem);
    const fromPem = signingOffThread(onLoop, ed25519KeyObject(pair.privateKeyPem));
    // RFC 8032 §7.1 TEST 1: a seed whose public key is published, so the key the wrapper reports is
    // checked against a source independent of both the SDK and node:crypto.
    const rfc = readVectorJson<{ priv: string; pub: string }[]>('ed25519/rfc8032-ed25519.json')[0]!;
    const seed = new Uint8Array(Buffer.from(rfc.priv, 'hex'));
    const seedKey = await importSigningKey(seed, { alg: 'EdDSA' });
    const fromSeed = signingOffThread(seedKey, ed25519KeyObject(seed));
    const msg = new TextEncoder().encode('{"a":1}');
    const sig = await fromPem.sign(msg);
    assert.ok(!Buffer.isBuffer(sig) && sig instanceof Uint8Array);
    assert.equal(Array.from(sig), Array.from(await onLoop.sign(msg)), 'deterministic: the same bytes');
    assert.equal(Array.from(await fromSeed.sign(msg)), Array.from(await seedKey.sign(msg)));
    assert.ok(await verifyWithJwk(pair.publicJwk, msg, sig));
    // The published key is the key pair's own (not the wrapped key's field compared with itself).
    assert.equal(fromPem.publicJwk, pair.publicJwk);
    assert.equal(fromSeed.publicJwk, {
      kty: 'OKP',
      crv: 'Ed25519',
      x: Buffer.from(rfc.pub, 'hex').toString('base64url'),
    });
    assert.match(
      await refused((async () => signingOffThread(onLoop, ed25519KeyObject(seed)))()),
      /not the signing key/,
    );
    // An artifact signed through it verifies like any other.
    assert.ok(await grantSignedByVerifies(fromSeed, pair.publicJwk, 'off-thread.test'));
  },
);

test('randomId: base64url of the asked length, never the same twice across pool refills', () => {
  const seen = new Set<string>();
  for (let i = 0; i < 2000; i++) {
    const id = randomId(16);
    assert.match(id, /^[A-Za-z0-9_-]{22}$/);
    seen.add(id);
  }
  assert.equal(seen.size, 2000);
  assert.match(randomId(12), /^[A-Za-z0-9_-]{16}$/);
  assert.throws(() => randomId(0), RangeError);
});

test('timeOrderedId: sorts as its creation time (byte order = ASCII order), unique within one millisecond', () => {
  const t0 = Date.UTC(2026, 10, 24, 12, 0, 0);
  const ids = [t0, t0 + 1, t0 + 61, t0 + 62, t0 + 3_600_000, Date.UTC(2100, 0, 1)].map((t) => timeOrderedId(t));
  assert.equal([...ids].sort(), ids, 'sorted by time');
  for (const id of ids) assert.match(id, /^[0-9A-Za-z]{8}[A-Za-z0-9_-]{16}$/);
  const same = new Set(Array.from({ length: 1000 }, () => timeOrderedId(t0)));
  assert.equal(same.size, 1000);
});

test.run();
