/**
 * Every case of our own committed vectors (test/vectors/own/*.json, written by
 * scripts/gen-own-vectors.mjs, never regenerated here) gives exactly its expected `valid` and
 * `code`, on both crypto backends, with a fresh verifier per case.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readdirSync } from 'node:fs';
import { chainOptions, ownVectorsDir, readOwnVectors, type OwnKeys } from '../helpers/own-vectors.js';
import { ERROR_CODES, parseTimestamp, type SpendStorage } from '../../src/index.js';
import { createVerifier } from '../../src/verifier/verify.js';
import { ALL_FEATURES } from '../helpers/features.js';
import { verifyBundleWith } from '../../src/artifacts/bundle.js';
import { verifyReceiptWith } from '../../src/artifacts/receipt.js';
import { verifyRevocationWith } from '../../src/artifacts/revocation.js';
import { createCtlCrypto } from '../../src/crypto/index.js';
import { registerP256 } from '../../src/crypto/algorithm-support.js';
import { nobleP256 } from '../../src/entries/p256.js';

const files = readdirSync(ownVectorsDir)
  .filter((f) => f.endsWith('.json'))
  .sort();
const loaded = files.map((f) => ({ name: f, file: readOwnVectors(f) }));

// The environment must not supply a key the case did not name (PROTOCOL.md §5 key fallback).
delete process.env['CTL_SBA_SIGNING_PUBLIC_KEY_PEM'];

test('the committed files are there and hold cases of every kind', () => {
  assert.equal(files, ['bundle.json', 'delegation.json', 'grant.json', 'human-agent.json', 'receipt.json', 'sba.json']);
  const kinds = new Set(loaded.flatMap((l) => l.file.cases.map((k: any) => k.kind)));
  assert.equal([...kinds].sort(), ['bundle', 'chain', 'receipt', 'revocation']);
  for (const { name, file } of loaded) {
    const valid = file.cases.filter((k: any) => k.expected.valid).length;
    assert.ok(valid >= 1, `${name} has a valid case`);
    assert.ok(file.cases.length - valid >= 1, `${name} has refusals`);
    for (const k of file.cases)
      if (k.expected.code)
        assert.ok((ERROR_CODES as readonly string[]).includes(k.expected.code), `${k.id}: ${k.expected.code}`);
  }
  const ids = loaded.flatMap((l) => l.file.cases.map((k: any) => k.id));
  assert.is(new Set(ids).size, ids.length, 'case ids are unique');
});

// The noble side as a QuickJS host builds it: P-256 registered from ctl/p256.
registerP256(nobleP256);
for (const backend of ['native', 'noble'] as const) {
  const c = createCtlCrypto(backend);
  for (const { file } of loaded) {
    const keys = file.keys as OwnKeys;
    for (const k of file.cases) {
      test(`${backend}: ${k.id}`, async () => {
        const now = () => parseTimestamp(k.options.now, 'now');
        const calls = { n: 0 };
        let result: { valid: boolean; error?: { code: string; message: string } };
        if (k.kind === 'chain') {
          const verify = createVerifier(c, ALL_FEATURES); // fresh caches and spend per case, every module
          const options = chainOptions(k, keys, calls);
          for (const [i, p] of (k.input.prior ?? []).entries()) {
            const r = await verify(p.sba, { ...options, amount: p.amount ?? options.amount });
            assert.ok(r.valid, `${k.id}: prior presentation ${i} must be accepted: ${JSON.stringify(r)}`);
          }
          result = await verify(k.input.sba, options);
          // A hold's capture (PROTOCOL.md §15), once the SBA verified.
          if (result.valid && k.input.capture !== undefined) {
            // Named by the SBA, on the storage the verification used (its own when the options give none).
            const where = { now, spendStorage: (options as { spendStorage?: SpendStorage }).spendStorage };
            const r = await verify.captureCtl!(k.input.sba, k.input.capture, where);
            result = r.captured ? { valid: true } : { valid: false, error: r.error };
          }
          if (k.options.offline !== false) assert.is(calls.n, 0, `${k.id}: an offline verifier made a network call`);
        } else if (k.kind === 'bundle') {
          const root = keys[k.options.trust.split(':')[1]]!.publicKeyPem;
          result = await verifyBundleWith(c, k.input.bundle, root, { now, minSequence: k.options.minSequence });
        } else if (k.kind === 'receipt') {
          const [form, name] = k.options.trust.split(':');
          const opts =
            form === 'jwks' ? { jwks: k.input.jwks } : form === 'none' ? {} : { publicKey: keys[name]!.publicKeyPem };
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
