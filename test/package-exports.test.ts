// Every entry of package.json `exports` with an ESM form has a CommonJS form beside it, resolved
// through the package's own name as a user's `require('ctl/edge')` would be, with the same named
// exports as the ESM build. Runs against dist/: `npm run build` first.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { repoRoot } from './helpers/vectors.js';

const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8'));
const requireFromPackage = createRequire(join(repoRoot, 'package.json'));
type Conditions = { types?: string; import?: string; require?: string };
const esmEntries = Object.entries(pkg.exports as Record<string, string | Conditions>).filter(
  (e): e is [string, Conditions] => typeof e[1] === 'object' && e[1] !== null && 'import' in e[1],
);

test('the ESM entries are the ones the SDK ships', () => {
  assert.equal(esmEntries.map(([k]) => k).sort(), [
    '.',
    './compact',
    './edge',
    './human-agent',
    './log',
    './online',
    './p256',
    './server',
    './testing',
    './verify',
    './wallet',
  ]);
});

for (const [subpath, conditions] of esmEntries) {
  const name = subpath === '.' ? pkg.name : `${pkg.name}/${subpath.slice(2)}`;
  test(`require('${name}') loads a CommonJS build with the ESM build's named exports`, async () => {
    assert.type(conditions.require, 'string', `exports["${subpath}"] has no "require" condition`);
    const cjsPath = join(repoRoot, conditions.require!);
    const esmPath = join(repoRoot, conditions.import!);
    for (const p of [cjsPath, esmPath]) assert.ok(existsSync(p), `${p} is missing: run \`npm run build\``);
    assert.is(requireFromPackage.resolve(name), cjsPath);
    assert.is(readFileSync(cjsPath, 'utf8').includes('export{'), false, `${conditions.require} is not CommonJS`);
    const cjs = requireFromPackage(name) as Record<string, unknown>;
    const esm = (await import(pathToFileURL(esmPath).href)) as Record<string, unknown>;
    const names = Object.keys(esm).sort();
    assert.ok(names.length > 0);
    assert.equal(Object.keys(cjs).sort(), names);
    for (const n of names) assert.is(typeof cjs[n], typeof esm[n], n);
  });
}

test('the CommonJS builds work, not only load', async () => {
  const core = requireFromPackage(pkg.name);
  assert.is(core.canonicalize({ b: 1, a: [true, 'x'] }), '{"a":[true,"x"],"b":1}');
  const keys = await core.generateKeyPair({ alg: 'EdDSA' });
  const edge = requireFromPackage(`${pkg.name}/edge`);
  const r = await edge.verifyCtlEdge({}, { amount: '1', currency: 'USD' });
  assert.is(!r.valid && r.error.code, 'malformed');
  const compact = requireFromPackage(`${pkg.name}/compact`);
  const bundle = await core.createTrustBundle(
    { sequence: 1, scope: {}, issuers: [], revokedGrants: [], expiresAt: '2999-01-01T00:00:00Z' },
    { signingKey: keys.privateKeyPem, issuer: 'root.test' },
  );
  assert.equal(compact.decodeCompact(compact.encodeCompact(bundle), 'bundle'), bundle);
});

test(
  'the role entries by require: the wallet signs, the verifier accepts, P-256 registers; ' +
    'each carries only its role',
  async () => {
    const wallet = requireFromPackage(`${pkg.name}/wallet`);
    const verify = requireFromPackage(`${pkg.name}/verify`);
    const p256 = requireFromPackage(`${pkg.name}/p256`);
    for (const absent of ['createSession', 'createSignedPolicyGrant', 'createGatewayClient'])
      assert.is(verify[absent], undefined, `ctl/verify exports ${absent}`);
    for (const absent of ['verifyCtl', 'createGatewayClient', 'createSignedPolicyGrant'])
      assert.is(wallet[absent], undefined, `ctl/wallet exports ${absent}`);
    assert.equal(Object.keys(p256).sort(), ['nobleP256']);
    verify.registerP256(p256.nobleP256); // a no-op on Node (native P-256), but accepted
    const core = requireFromPackage(pkg.name);
    const authority = await core.generateKeyPair({ alg: 'EdDSA' });
    const actor = await wallet.generateKeyPair({ alg: 'ES256' });
    const grant = await core.createSignedPolicyGrant(
      {
        policyHash: 'a'.repeat(64),
        actorKey: actor.publicJwk,
        allowedRails: ['x402'],
        allowedAssets: [{ standard: 'iso4217', code: 'USD' }],
        maxAmountMinor: '100',
        currency: 'USD',
        expiresAt: '2999-01-01T00:00:00Z',
      },
      {
        issuer: 'authority.example',
        signingKey: authority.privateKeyPem,
        revocationBaseUrl: 'https://authority.example',
      },
    );
    const fetch = async () => ({
      ok: true,
      status: 200,
      text: async () => JSON.stringify({ grantId: grant.grantId, revoked: false }),
    });
    const session = wallet.createSession(grant, {
      actorId: 'a-1',
      signingKey: actor.privateKeyPem,
      signingKeyId: 'w',
      fetch,
    });
    const sba = await session.createSba({ amount: '30', currency: 'USD', rail: 'x402' });
    const r = await verify.verifyCtl(verify.decodeSbaHeader(wallet.encodeSbaHeader(sba)), {
      amount: '30',
      currency: 'USD',
      signingKeyPem: authority.publicKeyPem,
      offline: true,
    });
    assert.ok(r.valid, JSON.stringify(r));
    // ctl/verify holds no private-key reader: a private key is refused, not parsed.
    const refused = await verify.importVerifyingKey(actor.privateKeyPem).then(
      () => 'accepted',
      (e: { code?: string }) => e.code,
    );
    assert.is(refused, 'malformed');
    assert.equal(await verify.toPublicJwk(authority.publicKeyPem), authority.publicJwk);
  },
);

test.run();
