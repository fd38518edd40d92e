// Ed25519 always; P-256 where the host has it (PROTOCOL.md §3, §9 `unsupported_algorithm`). The
// noble facade (what QuickJS runs) carries no P-256 until the host registers one from ctl/p256:
// until then every P-256 artifact is a refusal with that code, from every verification path,
// never a throw and never a pass; once registered, the same artifacts verify.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as nodeCrypto from 'node:crypto';
import { readVectorJson } from '../helpers/vectors.js';
import { createCtlCrypto } from '../../src/crypto/index.js';
import { createMemorySpendStorage } from '../../src/wallet/spend-storage.js';
import { registerP256 } from '../../src/crypto/algorithm-support.js';
import { nobleP256 } from '../../src/entries/p256.js';
import { createVerifier } from '../../src/verifier/verify.js';
import { createGrantWith, verifyGrantWith } from '../../src/artifacts/grant.js';
import { createSbaWith } from '../../src/artifacts/sba.js';
import { createBundleWith, verifyBundleWith } from '../../src/artifacts/bundle.js';
import { signReceiptWith, verifyReceiptWith } from '../../src/artifacts/receipt.js';
import { parseTimestamp } from '../../src/values.js';

const vectors = readVectorJson('ctl/vectors.json');
const native = createCtlCrypto('native');
const noble = createCtlCrypto('noble');
const now = () => parseTimestamp('2026-11-22T10:00:00Z', 'now');

function pair(kind: 'ed25519' | 'ec') {
  const k =
    kind === 'ec'
      ? nodeCrypto.generateKeyPairSync('ec', { namedCurve: 'P-256' })
      : nodeCrypto.generateKeyPairSync('ed25519');
  return {
    priv: k.privateKey.export({ format: 'pem', type: 'pkcs8' }) as string,
    pub: k.publicKey.export({ format: 'pem', type: 'spki' }) as string,
  };
}

// Signed with node:crypto: a P-256 authority (grant key), an Ed25519 wallet; a P-256 root.
const authority = pair('ec');
const wallet = pair('ed25519');
const root = pair('ec');
const edRoot = pair('ed25519');
const authorityJwk = await native.toPublicJwk(authority.pub);
const grant = await createGrantWith(
  native,
  {
    policyHash: 'a'.repeat(64),
    actorKey: await native.toPublicJwk(wallet.pub),
    allowedRails: ['x402'],
    allowedAssets: [{ standard: 'iso4217', code: 'USD' }],
    maxAmountMinor: '100',
    currency: 'USD',
    issuedAt: '2026-11-22T09:00:00Z',
    expiresAt: '2026-11-23T09:00:00Z',
  },
  {
    issuer: 'authority.example',
    keyId: 'auth-p256',
    signingKey: authority.priv,
    revocationBaseUrl: 'https://authority.example',
  },
);
const sba = await createSbaWith(
  native,
  {
    grant,
    sessionId: 's-1',
    actorId: 'a-1',
    maxAmountMinor: '30',
    issuedAt: '2026-11-22T09:30:00Z',
    expiresAt: '2026-11-22T11:00:00Z',
  } as never,
  { signingKey: wallet.priv, signingKeyId: 'w' } as never,
);
const listing = [
  {
    issuer: 'authority.example',
    keys: [{ ...authorityJwk, kid: 'auth-p256', alg: 'ES256' as const, purposes: ['grant' as const] }],
  },
];
const bundleFields = {
  sequence: 1,
  scope: {},
  issuers: listing,
  revokedGrants: [],
  issuedAt: '2026-11-22T00:00:00Z',
  expiresAt: '2026-11-24T00:00:00Z',
};
const p256RootBundle = await createBundleWith(native, bundleFields, { signingKey: root.priv, issuer: 'root.example' });
const edRootBundle = await createBundleWith(native, bundleFields, { signingKey: edRoot.priv, issuer: 'root.example' });
const receipt = await signReceiptWith(
  native,
  {
    receiptId: 'rcpt_1',
    sessionId: 'gw_sess_1',
    grantId: grant.grantId,
    purpose: 'ev:charge',
    amount: { amountMinor: '30', currency: 'USD' },
    merchant: 'm-1',
    paidAt: '2026-11-22T10:00:00Z',
    txRef: 'txid:1',
    rail: 'x402',
  } as never,
  { signingKey: authority.priv },
);

// A fresh ledger each time: one SBA is verified along several key paths (offline records each budgetId).
const base = () => ({ amount: '30', currency: 'USD', offline: true, now, spendStorage: createMemorySpendStorage() });
/** Every verification path a P-256 key can reach, as `code or valid` strings. */
async function outcomes(): Promise<Record<string, string>> {
  const verify = createVerifier(noble); // fresh caches
  const code = (r: { valid: boolean; error?: { code: string } }) => (r.valid ? 'valid' : r.error!.code);
  const shared: Record<string, string> = {};
  for (const id of ['02-chain-valid-es256-actor', '37-chain-valid-es256-high-s']) {
    const k = vectors.cases.find((c: any) => c.id === id);
    shared[id] = code(
      await createVerifier(noble)(k.input.sba, {
        amount: k.options.amount,
        currency: k.options.currency,
        merchantId: k.options.merchantId,
        offline: true,
        now: () => parseTimestamp(k.options.now, 'now'),
        signingKeyPem: vectors.keys.authority.publicKeyPem,
      }),
    );
  }
  return {
    ...shared,
    'grant key by PEM': code(await verify(sba, { ...base(), signingKeyPem: authority.pub })),
    'grant key by JWKS': code(await verify(sba, { ...base(), jwks: { keys: listing[0]!.keys } })),
    'grant key by bundle (Ed25519 root)': code(
      await verify(sba, { ...base(), trustBundles: [edRootBundle], rootPublicKeyPem: edRoot.pub }),
    ),
    'P-256 root through verifyCtl': code(
      await verify(sba, { ...base(), trustBundles: [p256RootBundle], rootPublicKeyPem: root.pub }),
    ),
    'verifyTrustBundle, P-256 root': code(await verifyBundleWith(noble, p256RootBundle, root.pub, { now })),
    'verifyPolicyGrant, P-256 key': code(await verifyGrantWith(noble, grant, { publicKey: authority.pub, now })),
    'verifyReceipt, P-256 key': code(await verifyReceiptWith(noble, receipt, { publicKey: authority.pub })),
  };
}

test(
  'without a P-256 backend, every P-256 artifact is unsupported_algorithm: a result, ' + 'not a throw, never a pass',
  async () => {
    registerP256(undefined);
    const r = await outcomes();
    for (const [path, outcome] of Object.entries(r)) assert.is(outcome, 'unsupported_algorithm', path);
    // Ed25519 is unaffected: the Ed25519-root bundle itself verifies.
    assert.ok((await verifyBundleWith(noble, edRootBundle, edRoot.pub, { now })).valid);
  },
);

test('registerP256(nobleP256): the same artifacts verify', async () => {
  registerP256(nobleP256);
  const r = await outcomes();
  for (const [path, outcome] of Object.entries(r)) assert.is(outcome, 'valid', path);
  registerP256(undefined);
});

test('the native backend never needed the registration', async () => {
  registerP256(undefined);
  const r = await createVerifier(native)(sba, { ...base(), signingKeyPem: authority.pub });
  assert.ok(r.valid, JSON.stringify(r));
});

test(
  'a root chain whose keys are P-256 is unsupported_algorithm without a backend, valid ' + 'with one (PROTOCOL.md §11)',
  async () => {
    const { readFileSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { repoRoot } = await import('../helpers/vectors.js');
    const { verifyRootChainWith } = await import('../../src/verifier/root-chain.js');
    const file = JSON.parse(readFileSync(join(repoRoot, 'test', 'vectors', 'own', 'root-chain', 'root.json'), 'utf8'));
    const k = file.cases.find((x: { id: string }) => x.id === 'root-valid-p256-set');
    const walk = () => verifyRootChainWith(noble, file.keys[k.options.root].publicKeyPem, k.input.statements, {});
    registerP256(undefined);
    const without = await walk();
    assert.is(without.valid ? 'valid' : without.error.code, 'unsupported_algorithm');
    registerP256(nobleP256);
    assert.ok((await walk()).valid);
    registerP256(undefined);
  },
);

test.run();
