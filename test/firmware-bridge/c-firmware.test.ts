/**
 * The C firmware stub (test/firmware-bridge/firmware.c, built here with the machine's gcc)
 * drives the reference bridge, a child process running the SDK from dist/ctl.iife.js inside
 * QuickJS: provision root → install a compact bundle → verify a compact SBA → replay refused →
 * hostile frames each answered with an error frame → still serving → clean exit.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as CTL from '../../src/index.js';
import { encodeCompact } from '../../src/compact.js';
import { makeFleet, iso, T0 } from '../offline/fleet.js';
import { bridgeMainPath } from '../../firmware-bridge/node/client.js';
import { root } from '../../firmware-bridge/node/device-script.js';

const dir = mkdtempSync(join(tmpdir(), 'ctl-firmware-'));
const exe = join(dir, 'firmware');

test.before(() => {
  if (!existsSync(join(root, 'dist', 'ctl.iife.js'))) throw new Error('dist/ctl.iife.js is missing: run `npm run build` before these tests');
});

test('gcc builds the firmware stub without warnings', () => {
  execFileSync('gcc', ['-std=c99', '-D_POSIX_C_SOURCE=200809L', '-O2', '-Wall', '-Wextra', '-Werror', '-o', exe, join(root, 'test', 'firmware-bridge', 'firmware.c')]);
  assert.ok(existsSync(exe));
});

async function files(amount = '1200') {
  const fleet = await makeFleet(CTL, { offline: { maxPayments: 5 } });
  writeFileSync(join(dir, 'root.pem'), fleet.root.publicKeyPem);
  writeFileSync(join(dir, 'bundle.cbor'), encodeCompact(await fleet.bundle(1)));
  writeFileSync(join(dir, 'sba.cbor'), encodeCompact(await fleet.sba(amount)));
  return fleet;
}

function runFirmware(amount: string, flash: string) {
  const args = [join(dir, 'root.pem'), join(dir, 'bundle.cbor'), join(dir, 'sba.cbor'), amount, 'EUR', '--',
    process.execPath, bridgeMainPath, '--flash', flash, '--now', iso(T0)];
  return spawnSync(exe, args, { encoding: 'utf8', timeout: 60_000 });
}

test('the C firmware completes a verification through the bridge, and survives hostile frames', async () => {
  await files('1200');
  const r = runFirmware('1200', join(dir, 'flash-a.json'));
  const steps = Object.fromEntries(r.stdout.split('\n').filter((l) => l.startsWith('step ')).map((l) => {
    const [, name, verdict, ...rest] = l.split(' ');
    return [name, `${verdict}${rest.length ? ' ' + rest.join(' ') : ''}`];
  }));
  assert.is(r.status, 0, `firmware exit ${r.status}\n${r.stdout}\n${r.stderr}`);
  assert.is(steps['provision'], 'ok');
  assert.is(steps['install-bundle'], 'ok');
  assert.is(steps['verify'], 'ok valid=true');
  assert.is(steps['verify-replay'], 'ok valid=false code=replay');
  for (const s of ['garbage', 'non-canonical', 'truncated', 'not-a-map', 'empty', 'oversized']) assert.is(steps[s], 'ok code=bad_frame', s);
  assert.is(steps['unknown-op'], 'ok code=unknown_op');
  assert.is(steps['status-after-abuse'], 'ok');
  assert.is(steps['bridge-exit'], 'ok exit=0');
});

test('the firmware reports a refusal: the SBA is for less than the payment', async () => {
  await files('1200');
  const r = runFirmware('5000', join(dir, 'flash-b.json'));
  assert.is(r.status, 1, r.stdout);
  assert.match(r.stdout, /step verify FAIL valid=false code=amount_exceeds_authorization/);
});

test.after(() => rmSync(dir, { recursive: true, force: true }));
test.run();
