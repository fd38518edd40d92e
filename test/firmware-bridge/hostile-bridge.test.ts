/**
 * The C firmware stub (test/firmware-bridge/firmware.c) against a hostile bridge: a Node stand-in
 * that answers every request with a frame whose CBOR carries huge length or count heads (up to
 * 2^64-1), or whose frame prefix is huge. The firmware's reader must refuse them (bounds checked
 * without adding a peer-controlled length to a position, which wraps around): it reports the steps
 * as failed and exits non-zero by itself, never crashes, hangs or reads out of bounds. Built with
 * -fsanitize=address,undefined when this machine's gcc can, so an overflow aborts the run.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { root } from '../../firmware-bridge/node/device-script.js';

const dir = mkdtempSync(join(tmpdir(), 'ctl-hostile-'));
const exe = join(dir, 'firmware');
const fake = join(dir, 'hostile-bridge.mjs');
let sanitized = false;

// The stand-in: reads length-prefixed frames, answers each with the hex payload given on the
// command line (or, with `--raw`, writes those bytes as they are), and exits when stdin closes.
writeFileSync(
  fake,
  `
const [mode, hex] = process.argv.slice(2);
const answer = Buffer.from(hex, 'hex');
let buf = Buffer.alloc(0);
process.stdin.on('data', (d) => {
  buf = Buffer.concat([buf, d]);
  while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
    buf = buf.subarray(4 + buf.readUInt32BE(0));
    if (mode === '--raw') process.stdout.write(answer);
    else {
      const len = Buffer.alloc(4);
      len.writeUInt32BE(answer.length);
      process.stdout.write(Buffer.concat([len, answer]));
    }
  }
});
process.stdin.on('end', () => process.exit(0));
process.stdout.on('error', () => process.exit(0));
`,
);
writeFileSync(join(dir, 'root.pem'), '-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----\n');
writeFileSync(join(dir, 'bundle.cbor'), Buffer.from([0xa0]));
writeFileSync(join(dir, 'sba.cbor'), Buffer.from([0xa0]));

const t = (s: string) => Buffer.concat([Buffer.from([0x60 | s.length]), Buffer.from(s)]);
const head8 = (major: number, n: bigint) => {
  const b = Buffer.alloc(9);
  b[0] = (major << 5) | 27;
  b.writeBigUInt64BE(n, 1);
  return b;
};
const MAX = 2n ** 64n - 1n;
const hex = (...parts: Buffer[]) => Buffer.concat(parts).toString('hex');

const hostile: Array<[string, string]> = [
  // {"error": {"code": <text of length 2^64-1>}}: the copy into the 128-byte code buffer.
  ['text-length', hex(Buffer.from([0xa1]), t('error'), Buffer.from([0xa1]), t('code'), head8(3, MAX))],
  // {"result": {"error": {"code": <text of length 2^64-1>}}}: the same through a deeper path.
  [
    'nested-text-length',
    hex(
      Buffer.from([0xa1]),
      t('result'),
      Buffer.from([0xa1]),
      t('error'),
      Buffer.from([0xa1]),
      t('code'),
      head8(3, MAX),
    ),
  ],
  // A map of 2^64-1 pairs whose key's length (2^64-9) wraps the reader back onto that key: a loop.
  ['key-length-backwards', hex(head8(5, MAX), head8(3, MAX - 8n))],
  // {"x": <bytes of length 2^64-1>, "ok": true}: skipping the value must not move the reader back.
  ['skipped-value-length', hex(Buffer.from([0xa2]), t('x'), head8(2, MAX), t('ok'), Buffer.from([0xf5]))],
  // {"error": <map of 2^63 pairs>} then "ok": true: 2*n wraps to 0 pairs, which would surface the "ok".
  ['map-count', hex(Buffer.from([0xa2]), t('error'), head8(5, 2n ** 63n), t('ok'), Buffer.from([0xf5]))],
  // An array of 2^64-1 items with nothing after it.
  ['array-count', hex(Buffer.from([0xa1]), t('error'), head8(4, MAX))],
];

test('gcc builds the firmware stub (with ASan and UBSan when available)', () => {
  const base = [
    '-std=c99',
    '-D_POSIX_C_SOURCE=200809L',
    '-O1',
    '-g',
    '-Wall',
    '-Wextra',
    '-Werror',
    '-o',
    exe,
    join(root, 'test', 'firmware-bridge', 'firmware.c'),
  ];
  const san = spawnSync(
    'gcc',
    ['-fsanitize=address,undefined', '-fno-sanitize-recover=all', '-fno-omit-frame-pointer', ...base],
    { encoding: 'utf8' },
  );
  sanitized = san.status === 0;
  if (!sanitized) {
    console.log(`(no sanitizers on this machine: ${san.stderr.split('\n')[0]}; building plain)`);
    const plain = spawnSync('gcc', base, { encoding: 'utf8' });
    assert.is(plain.status, 0, plain.stderr);
  }
});

function run(mode: string, payload: string) {
  return spawnSync(
    exe,
    [
      join(dir, 'root.pem'),
      join(dir, 'bundle.cbor'),
      join(dir, 'sba.cbor'),
      '1200',
      'EUR',
      '--',
      process.execPath,
      fake,
      mode,
      payload,
    ],
    {
      encoding: 'utf8',
      timeout: 20_000,
      env: {
        ...process.env,
        ASAN_OPTIONS: 'abort_on_error=1:detect_leaks=1',
        UBSAN_OPTIONS: 'halt_on_error=1:abort_on_error=1:print_stacktrace=1',
      },
    },
  );
}

function assertCleanExit(r: ReturnType<typeof run>, what: string) {
  const log = `${what}: status ${r.status} signal ${r.signal}\n${r.stdout}\n${r.stderr}`;
  assert.not.ok(r.error, `${log}\n${r.error?.message} (hung?)`);
  assert.is(r.signal, null, `crashed: ${log}`);
  assert.type(r.status, 'number', log);
  assert.is.not(r.status, 0, `a hostile bridge must fail the run: ${log}`);
  assert.not.match(r.stderr, /Sanitizer|runtime error/, log);
}

for (const [name, payload] of hostile) {
  test(`hostile answer ${name}: every step fails, the firmware exits 1 cleanly`, () => {
    const r = run('--frame', payload);
    assertCleanExit(r, name);
    assert.is(r.status, 1, r.stdout + r.stderr);
    for (const step of [
      'provision',
      'install-bundle',
      'verify',
      'verify-replay',
      'garbage',
      'oversized',
      'status-after-abuse',
    ]) {
      assert.match(r.stdout, new RegExp(`^step ${step} FAIL`, 'm'), `${name}: ${step}\n${r.stdout}`);
    }
    assert.match(r.stdout, /^firmware: FAILED$/m);
  });
}

test('hostile frame prefix 0xffffffff: the firmware reports the link closed and exits 4', () => {
  const r = run('--raw', 'ffffffff' + '00'.repeat(64));
  assertCleanExit(r, 'frame-prefix');
  assert.is(r.status, 4, r.stdout + r.stderr);
  assert.match(r.stderr, /bridge closed the link/);
});

test('the build was sanitized when the machine has libasan', () => {
  const lib = spawnSync('gcc', ['-print-file-name=libasan.so'], { encoding: 'utf8' }).stdout.trim();
  if (lib.startsWith('/')) assert.ok(sanitized, `libasan at ${lib} but the sanitized build failed`);
});

test.after(() => rmSync(dir, { recursive: true, force: true }));
test.run();
