// What a device build must carry, and must not (ARCHITECTURE.md rule 12): the module swaps of
// rollup.config.mjs took effect, each role bundle carries its role and no other, and a verifier
// can neither sign nor make keys. Sizes are not checked here: `node bench/sdk.mjs` reports them.
// Runs against dist/ (scripts/test.mjs builds a missing or stale dist/).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { runInNewContext } from 'node:vm';
import { pathToFileURL } from 'node:url';
import { repoRoot } from '../helpers/vectors.js';

const read = (f: string) => readFileSync(join(repoRoot, 'dist', f), 'utf8');
/** The global an IIFE defines, evaluated in a context with no host object at all. */
const iifeGlobal = (f: string, name = 'CTL'): Record<string, unknown> => {
  const context: Record<string, unknown> = {};
  runInNewContext(read(f), context, { filename: f });
  return context[name] as Record<string, unknown>;
};
const esm = async (f: string): Promise<Record<string, unknown>> =>
  import(pathToFileURL(join(repoRoot, 'dist', f)).href);

/** What signs or makes keys: a verifier build that had any of these could spend, not only check. */
const SIGNING = [
  'createSession',
  'createSbaSigner',
  'createSignedSessionBudgetAuthorization',
  'createSignedPolicyGrant',
  'createTrustBundle',
  'generateKeyPair',
  'importSigningKey',
  'signReceipt',
];

test('a verifier build can neither sign nor make keys: ctl/verify, its IIFE, ctl/edge', async () => {
  const builds: Array<[string, Record<string, unknown>]> = [
    ['ctl-verify.iife.js', iifeGlobal('ctl-verify.iife.js')],
    ['verify.js', await esm('verify.js')],
    ['edge.js', await esm('edge.js')],
  ];
  for (const [f, m] of builds) {
    const signing = SIGNING.filter((name) => name in m);
    assert.equal(signing, [], `dist/${f} exports ${signing.join(', ')}`);
    assert.is(typeof (m['verifyCtl'] ?? m['verifyCtlEdge']), 'function', `dist/${f} verifies`);
  }
  // The wallet's role is the other way round: it signs, and verifies only bundles (its revocations).
  const wallet = iifeGlobal('ctl-wallet.iife.js');
  assert.is(typeof wallet['createSession'], 'function');
  assert.is(wallet['verifyCtl'], undefined, 'ctl-wallet.iife.js carries the merchant verifier');
  assert.is(typeof wallet['verifyTrustBundle'], 'function');
});

test('the role bundles carry only their role: no P-256 stack, no gateway client in a device build', () => {
  // @noble/curves' weierstrass leaves this error string in any bundle that carries it.
  const p256Marker = /Weierstrass Point expected/;
  for (const f of [
    'ctl-verify.iife.js',
    'ctl-wallet.iife.js',
    'index.js',
    'index.cjs',
    'ctl.iife.js',
    'verify.js',
    'wallet.js',
    'edge.js',
  ]) {
    assert.not.ok(p256Marker.test(read(f)), `dist/${f} carries @noble/curves (P-256 belongs in ctl/p256 alone)`);
  }
  assert.ok(p256Marker.test(read('p256.js')), 'dist/p256.js carries the pure-JS P-256');
  for (const f of ['ctl-verify.iife.js', 'ctl-wallet.iife.js']) {
    assert.not.ok(read(f).includes('continuationToken'), `dist/${f} carries the gateway client`);
  }
});

test('the module swaps hold: the role IIFEs probe no host, ctl/verify carries no noble signer', () => {
  // rollup.config.mjs: host-embedded.ts / native-none.ts in the role IIFEs, noble-verify-backend.ts in ctl/verify.
  // (A guarded TextEncoder or getRandomValues is a feature test the engine may pass or not: allowed.
  // noble's unused sha512Async names crypto.subtle, so `.subtle` is checked where noble is absent.)
  for (const [f, probes] of [
    ['ctl-verify.iife.js', ['getBuiltinModule', 'process.env', 'Deno', '.subtle']],
    ['ctl-wallet.iife.js', ['getBuiltinModule', 'process.env', 'Deno']],
  ] as const) {
    const text = read(f);
    for (const probe of probes) {
      assert.not.ok(text.includes(probe), `dist/${f} probes the host (${probe}): the embedded host swap did not apply`);
    }
  }
  assert.ok(read('ctl.iife.js').includes('getBuiltinModule'), 'dist/ctl.iife.js keeps the host probes');
  for (const f of ['ctl-verify.iife.js', 'verify.js', 'verify.cjs']) {
    assert.not.ok(
      read(f).includes('noble-ed25519'),
      `dist/${f} carries @noble/ed25519 (the verify-only backend swap did not apply)`,
    );
  }
  assert.ok(read('ctl-wallet.iife.js').includes('noble-ed25519'), 'the wallet signs with noble');
});

test(
  'the opt-in modules stay out until registered: a verifier IIFE has no did:key resolver ' + 'or fetch of its own',
  () => {
    const text = read('ctl-verify.iife.js');
    // did-key.ts's base58btc alphabet and fetch-json.ts's reader are the modules' own.
    assert.not.ok(
      text.includes('123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz'),
      'ctl-verify.iife.js carries did:key resolution (ctl/human-agent)',
    );
    assert.ok(
      read('ctl-human-agent.iife.js').includes('123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz'),
      "the marker is did-key.ts's",
    );
    const g = iifeGlobal('ctl-verify.iife.js');
    assert.is(typeof g['registerHumanAgent'], 'function');
    assert.is(typeof g['registerOnlineChecks'], 'function');
  },
);

test.run();
