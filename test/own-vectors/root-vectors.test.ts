/**
 * The committed root-chain vectors (test/vectors/own/root-chain/root.json, written by
 * scripts/gen-root-vectors.mjs, never regenerated here) give exactly their expected verdict,
 * code and root version, on both crypto backends (PROTOCOL.md §11).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '../helpers/vectors.js';
import { ERROR_CODES, parseTimestamp } from '../../src/index.js';
import { verifyRootChainWith } from '../../src/verifier/root-chain.js';
import { verifyBundleWith } from '../../src/artifacts/bundle.js';
import { createCtlCrypto } from '../../src/crypto/index.js';
import { registerP256 } from '../../src/crypto/algorithm-support.js';
import { nobleP256 } from '../../src/entries/p256.js';

const file = JSON.parse(readFileSync(join(repoRoot, 'test', 'vectors', 'own', 'root-chain', 'root.json'), 'utf8'));
const keys = file.keys as Record<string, { publicKeyPem: string }>;

test('the committed file covers valid chains and every root refusal', () => {
  const codes = new Set(file.cases.filter((k: any) => !k.expected.valid).map((k: any) => k.expected.code));
  for (const code of [
    'root_rotation_invalid',
    'root_rollback',
    'trust_bundle_invalid',
    'malformed',
    'unsupported_version',
  ])
    assert.ok(codes.has(code), code);
  for (const code of codes) assert.ok((ERROR_CODES as readonly string[]).includes(code as string), String(code));
  assert.ok(file.cases.filter((k: any) => k.expected.valid).length >= 5);
  assert.equal(new Set(file.cases.map((k: any) => k.kind)), new Set(['root-chain', 'root-bundle']));
  const ids = file.cases.map((k: any) => k.id);
  assert.is(new Set(ids).size, ids.length);
});

// The noble side as a QuickJS host builds it: P-256 registered from ctl/p256.
registerP256(nobleP256);
for (const backend of ['native', 'noble'] as const) {
  const c = createCtlCrypto(backend);
  for (const k of file.cases) {
    test(`${backend}: ${k.id}`, async () => {
      const root = keys[k.options.root]!.publicKeyPem;
      const r =
        k.kind === 'root-chain'
          ? await verifyRootChainWith(c, root, k.input.statements, {
              minVersion: k.options.minVersion,
              accepted: k.options.accepted,
            })
          : await verifyBundleWith(c, k.input.bundle, root, {
              now: () => parseTimestamp(k.options.now, 'now'),
              rootChain: k.input.statements,
              minRootVersion: k.options.minRootVersion,
            });
      assert.is(r.valid, k.expected.valid, `${k.id}: ${JSON.stringify(r)}`);
      if (r.valid && k.expected.rootVersion !== undefined) assert.is(r.rootVersion, k.expected.rootVersion);
      if (!r.valid) assert.is(r.error.code, k.expected.code, `${k.id}: ${r.error.message}`);
    });
  }
}

test.run();
