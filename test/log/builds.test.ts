/**
 * What the log's builds carry (ARCHITECTURE.md rule 12): `ctl/log` signs only with a key it is
 * handed, so it has no noble signer and no private-key import, and its IIFE probes no host; the
 * terminal's `ctl/verify` has the log's verifiers and none of its signers. Runs against dist/.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { runInNewContext } from 'node:vm';
import { pathToFileURL } from 'node:url';
import { repoRoot } from '../helpers/vectors.js';

const read = (f: string) => readFileSync(join(repoRoot, 'dist', f), 'utf8');
const iife = (f: string, name: string): Record<string, unknown> => {
  const context: Record<string, unknown> = {};
  runInNewContext(read(f), context, { filename: f });
  return context[name] as Record<string, unknown>;
};
const esm = async (f: string): Promise<Record<string, unknown>> =>
  import(pathToFileURL(join(repoRoot, 'dist', f)).href);

const VERIFIERS = ['verifyCheckpoint', 'verifyTlogProof', 'verifyInclusion', 'verifyConsistency', 'logEntry'];
const LOG_SIGNERS = ['createNoteSigner', 'createCosigner', 'signNote', 'signCheckpoint'];
const KEY_MAKERS = ['importSigningKey', 'generateKeyPair', 'createSession'];

test('ctl/log: every part, no noble signer, no private-key import; its IIFE probes no host', async () => {
  for (const [f, m] of [
    ['log.js', await esm('log.js')],
    ['ctl-log.iife.js', iife('ctl-log.iife.js', 'CTLLog')],
  ] as const) {
    for (const name of [...VERIFIERS, ...LOG_SIGNERS, 'proveInclusion', 'createTileHashReader'])
      assert.is(typeof m[name], 'function', `dist/${f} lacks ${name}`);
    assert.equal(
      KEY_MAKERS.filter((n) => n in m),
      [],
      `dist/${f} makes or imports private keys`,
    );
  }
  for (const f of ['log.js', 'log.cjs', 'ctl-log.iife.js'])
    assert.not.ok(read(f).includes('noble-ed25519'), `dist/${f} carries @noble/ed25519 (verify-only swap)`);
  for (const probe of ['getBuiltinModule', 'process.env', 'Deno', '.subtle'])
    assert.not.ok(read('ctl-log.iife.js').includes(probe), `dist/ctl-log.iife.js probes the host (${probe})`);
});

test("a terminal's ctl/verify verifies the log and signs nothing of it", async () => {
  for (const [f, m] of [
    ['verify.js', await esm('verify.js')],
    ['ctl-verify.iife.js', iife('ctl-verify.iife.js', 'CTL')],
  ] as const) {
    for (const name of VERIFIERS) assert.is(typeof m[name], 'function', `dist/${f} lacks ${name}`);
    assert.equal(
      LOG_SIGNERS.filter((n) => n in m),
      [],
      `dist/${f} signs log notes`,
    );
  }
});

test.run();
