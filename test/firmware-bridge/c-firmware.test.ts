/**
 * The C firmware stub (test/firmware-bridge/firmware.c, built here with the machine's gcc)
 * drives the reference bridge, a child process running the verifier bundle alone
 * (dist/ctl-verify.iife.js: a terminal only verifies) inside QuickJS: provision root → install a compact bundle →
 * verify a compact SBA → replay refused → hostile frames each answered with an error frame → still serving → clean
 * exit. The runs use a build with AddressSanitizer and its leak checker on (as a firmware vendor's CI would), so a
 * buffer the stub forgets to free fails the test.
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
const checked = join(dir, 'firmware-asan');
let sanitized = false;

test.before(() => {
  if (!existsSync(join(root, 'dist', 'ctl-verify.iife.js')))
    throw new Error('dist/ctl-verify.iife.js is missing: run `npm run build` before these tests');
});

test('gcc builds the firmware stub without warnings', () => {
  execFileSync('gcc', [
    '-std=c99',
    '-D_POSIX_C_SOURCE=200809L',
    '-O2',
    '-Wall',
    '-Wextra',
    '-Werror',
    '-o',
    exe,
    join(root, 'test', 'firmware-bridge', 'firmware.c'),
  ]);
  assert.ok(existsSync(exe));
});

test('gcc builds it with AddressSanitizer, LeakSanitizer and UBSan (when the machine has them)', () => {
  const args = [
    '-std=c99',
    '-D_POSIX_C_SOURCE=200809L',
    '-O1',
    '-g',
    '-fsanitize=address,undefined',
    '-fno-sanitize-recover=all',
    '-fno-omit-frame-pointer',
    '-Wall',
    '-Wextra',
    '-Werror',
    '-o',
    checked,
    join(root, 'test', 'firmware-bridge', 'firmware.c'),
  ];
  const r = spawnSync('gcc', args, { encoding: 'utf8' });
  sanitized = r.status === 0;
  const lib = spawnSync('gcc', ['-print-file-name=libasan.so'], { encoding: 'utf8' }).stdout.trim();
  if (lib.startsWith('/')) assert.ok(sanitized, `libasan at ${lib} but the sanitized build failed: ${r.stderr}`);
  else console.log('(no libasan on this machine: the runs below use the plain build, without leak checking)');
});

async function files(amount = '1200') {
  const fleet = await makeFleet(CTL, { offline: { maxPayments: 5 } });
  writeFileSync(join(dir, 'root.pem'), fleet.root.publicKeyPem);
  writeFileSync(join(dir, 'bundle.cbor'), encodeCompact(await fleet.bundle(1)));
  writeFileSync(join(dir, 'sba.cbor'), encodeCompact(await fleet.sba(amount)));
  return fleet;
}

function runFirmware(amount: string, flash: string) {
  const args = [
    join(dir, 'root.pem'),
    join(dir, 'bundle.cbor'),
    join(dir, 'sba.cbor'),
    amount,
    'EUR',
    '--',
    process.execPath,
    bridgeMainPath,
    '--flash',
    flash,
    '--bundle',
    'verify',
    '--now',
    iso(T0),
  ];
  return spawnSync(sanitized ? checked : exe, args, {
    encoding: 'utf8',
    timeout: 60_000,
    env: {
      ...process.env,
      ASAN_OPTIONS: 'detect_leaks=1:abort_on_error=1',
      UBSAN_OPTIONS: 'halt_on_error=1:print_stacktrace=1',
    },
  });
}

/** No sanitizer report: no leak, no overflow, no undefined behaviour. */
const assertClean = (r: ReturnType<typeof runFirmware>) => {
  assert.is(r.signal, null, `crashed: ${r.stdout}\n${r.stderr}`);
  assert.not.match(r.stderr, /Sanitizer|runtime error|leaked/, r.stderr);
};

test('the C firmware completes a verification through the bridge, and survives hostile frames', async () => {
  await files('1200');
  const r = runFirmware('1200', join(dir, 'flash-a.json'));
  const steps = Object.fromEntries(
    r.stdout
      .split('\n')
      .filter((l) => l.startsWith('step '))
      .map((l) => {
        const [, name, verdict, ...rest] = l.split(' ');
        return [name, `${verdict}${rest.length ? ' ' + rest.join(' ') : ''}`];
      }),
  );
  assert.is(r.status, 0, `firmware exit ${r.status}\n${r.stdout}\n${r.stderr}`);
  assert.is(steps['provision'], 'ok');
  assert.is(steps['install-bundle'], 'ok');
  assert.is(steps['verify'], 'ok valid=true');
  assert.is(steps['verify-replay'], 'ok valid=false code=replay');
  for (const s of ['garbage', 'non-canonical', 'truncated', 'not-a-map', 'empty', 'oversized'])
    assert.is(steps[s], 'ok code=bad_frame', s);
  assert.is(steps['unknown-op'], 'ok code=unknown_op');
  assert.is(steps['status-after-abuse'], 'ok');
  assert.is(steps['bridge-exit'], 'ok exit=0');
  assert.match(r.stderr, /ready \(engine quickjs, bundle verify\)/, 'the bridge ran the verifier bundle');
  assertClean(r);
});

test('the firmware reports a refusal: the SBA is for less than the payment', async () => {
  await files('1200');
  const r = runFirmware('5000', join(dir, 'flash-b.json'));
  assert.is(r.status, 1, r.stdout);
  assert.match(r.stdout, /step verify FAIL valid=false code=amount_exceeds_authorization/);
  assertClean(r);
});

test.after(() => rmSync(dir, { recursive: true, force: true }));
test.run();
