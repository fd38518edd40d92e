/**
 * Every case of our own committed vectors (test/vectors/own/*.json, written by
 * scripts/gen-own-vectors.mjs, never regenerated here) gives exactly its expected `valid` and
 * `code`, on both crypto backends, with a fresh verifier per case.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '../helpers/vectors.js';
import { ERROR_CODES, parseTimestamp } from '../../src/index.js';
import { createVerifier, type VerifyCtlOptions } from '../../src/verifier/verify.js';
import { ALL_FEATURES } from '../helpers/features.js';
import { verifyBundleWith } from '../../src/artifacts/bundle.js';
import { verifyReceiptWith } from '../../src/artifacts/receipt.js';
import { verifyRevocationWith } from '../../src/artifacts/revocation.js';
import { createCtlCrypto } from '../../src/crypto/index.js';
import type { FetchLike } from '../../src/net/fetch-json.js';
import { registerP256 } from '../../src/crypto/algorithm-support.js';
import { nobleP256 } from '../../src/entries/p256.js';

const dir = join(repoRoot, 'test', 'vectors', 'own');
const files = readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
const loaded = files.map((f) => ({ name: f, file: JSON.parse(readFileSync(join(dir, f), 'utf8')) }));

// The environment must not supply a key the case did not name (PROTOCOL.md §5 key fallback).
delete process.env['CTL_SBA_SIGNING_PUBLIC_KEY_PEM'];

type Keys = Record<string, { publicKeyPem: string }>;

/** The revocation endpoint a case describes; counts calls so offline cases can prove they made none. */
function fakeFetch(spec: any, calls: { n: number }): FetchLike {
  return async () => {
    calls.n++;
    if (!spec) throw new Error('this case gave no revocation answer: no network expected');
    if (spec.throws) throw new Error(spec.throws);
    const text = spec.text ?? JSON.stringify(spec.body);
    return { ok: spec.status >= 200 && spec.status < 300, status: spec.status, text: async () => text };
  };
}

function chainTrust(trust: string, input: any, keys: Keys): Partial<VerifyCtlOptions> {
  const [form, name] = trust.split(':') as [string, string | undefined];
  if (form === 'signingKeyPem') return { signingKeyPem: keys[name!]!.publicKeyPem };
  if (form === 'trustBundles+root') return { trustBundles: input.trustBundles, rootPublicKeyPem: keys[name!]!.publicKeyPem };
  if (form === 'jwks') return { jwks: input.jwks };
  if (form === 'none') return {};
  throw new Error('unknown trust form ' + trust);
}

test('the committed files are there and hold cases of every kind', () => {
  assert.equal(files, ['bundle.json', 'grant.json', 'human-agent.json', 'receipt.json', 'sba.json']);
  const kinds = new Set(loaded.flatMap((l) => l.file.cases.map((k: any) => k.kind)));
  assert.equal([...kinds].sort(), ['bundle', 'chain', 'receipt', 'revocation']);
  for (const { name, file } of loaded) {
    const valid = file.cases.filter((k: any) => k.expected.valid).length;
    assert.ok(valid >= 1, `${name} has a valid case`);
    assert.ok(file.cases.length - valid >= 1, `${name} has refusals`);
    for (const k of file.cases) if (k.expected.code) assert.ok((ERROR_CODES as readonly string[]).includes(k.expected.code), `${k.id}: ${k.expected.code}`);
  }
  const ids = loaded.flatMap((l) => l.file.cases.map((k: any) => k.id));
  assert.is(new Set(ids).size, ids.length, 'case ids are unique');
});

// The noble side as a QuickJS host builds it: P-256 registered from ctl/p256.
registerP256(nobleP256);
for (const backend of ['native', 'noble'] as const) {
  const c = createCtlCrypto(backend);
  for (const { file } of loaded) {
    const keys = file.keys as Keys;
    for (const k of file.cases) {
      test(`${backend}: ${k.id}`, async () => {
        const now = () => parseTimestamp(k.options.now, 'now');
        const calls = { n: 0 };
        let result: { valid: boolean; error?: { code: string; message: string } };
        if (k.kind === 'chain') {
          const verify = createVerifier(c, ALL_FEATURES); // fresh caches and spend per case, every module
          const o = k.options;
          const options: VerifyCtlOptions = {
            amount: o.amount, currency: o.currency, merchantId: o.merchantId, rail: o.rail, purpose: o.purpose, asset: o.asset,
            requireIntentHash: o.requireIntentHash, clockToleranceMs: o.clockToleranceMs, trackSpend: o.trackSpend, trustedHumans: o.trustedHumans,
            offline: o.offline !== false, now, fetch: fakeFetch(o.revocation, calls), ...chainTrust(o.trust, k.input, keys),
          };
          for (const [i, p] of (k.input.prior ?? []).entries()) {
            const r = await verify(p.sba, { ...options, amount: p.amount ?? options.amount });
            assert.ok(r.valid, `${k.id}: prior presentation ${i} must be accepted: ${JSON.stringify(r)}`);
          }
          result = await verify(k.input.sba, options);
          if (o.offline !== false) assert.is(calls.n, 0, `${k.id}: an offline verifier made a network call`);
        } else if (k.kind === 'bundle') {
          const root = keys[k.options.trust.split(':')[1]]!.publicKeyPem;
          result = await verifyBundleWith(c, k.input.bundle, root, { now, minSequence: k.options.minSequence });
        } else if (k.kind === 'receipt') {
          const [form, name] = k.options.trust.split(':');
          const opts = form === 'jwks' ? { jwks: k.input.jwks } : form === 'none' ? {} : { publicKey: keys[name]!.publicKeyPem };
          result = await verifyReceiptWith(c, k.input.receipt, opts);
        } else if (k.kind === 'revocation') {
          result = await verifyRevocationWith(c, k.input.revocation, { now, maxAgeMs: k.options.maxAgeMs });
        } else throw new Error('unknown kind ' + k.kind);
        assert.is(result.valid, k.expected.valid, `${k.id}: ${JSON.stringify(result)}`);
        if (!result.valid) {
          assert.type(result.error?.message, 'string');
          if (k.expected.code) assert.is(result.error?.code, k.expected.code, `${k.id}: ${JSON.stringify(result)}`);
        }
      });
    }
  }
}

test.run();
