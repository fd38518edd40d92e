/**
 * The file-backed flash of the reference host shared by two processes at once (two bridges, or a
 * bridge and a maintenance tool, on one --flash file): each compare-and-set runs under an
 * exclusive lock file, so the offline bound holds across processes: together they reserve exactly
 * the ceiling, never more. A lock left by a process that died is broken; one held by a live process
 * too long is a clear error.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createFileByteStorage } from '../../firmware-bridge/node/file-storage.js';
import { createKvSpendStorage } from '../../firmware-bridge/kv-spend-storage.js';

const dir = mkdtempSync(join(tmpdir(), 'ctl-flash-procs-'));
const worker = fileURLToPath(new URL('./two-process-worker.js', import.meta.url));

function run(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [worker, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('close', (code) => resolve({ code, out, err }));
  });
}

test('two processes paying on one flash file at once reserve exactly the ceiling', async () => {
  const flash = join(dir, 'shared.json');
  const ceiling = 150;
  const start = String(Date.now() + 700); // both start together, after node has loaded
  const [a, b] = await Promise.all([
    run([flash, 'a', '120', String(ceiling), start]),
    run([flash, 'b', '120', String(ceiling), start]),
  ]);
  assert.is(a.code, 0, a.err);
  assert.is(b.code, 0, b.err);
  const got = [a, b].map((r) => JSON.parse(r.out).reserved as number);
  assert.ok(got[0]! > 0 && got[1]! > 0, `both processes took part: ${got}`);
  assert.is(got[0]! + got[1]!, ceiling, `reserved ${got} against a ceiling of ${ceiling}`);
  assert.is(await createKvSpendStorage(createFileByteStorage(flash)).total('offline-count:g'), BigInt(ceiling));
  assert.not.ok(existsSync(`${flash}.lock`), 'no lock left behind');
});

test('a lock left by a process that died is broken', async () => {
  const flash = join(dir, 'stale.json');
  const dead = spawnSync(process.execPath, ['-e', '']);
  writeFileSync(`${flash}.lock`, `${dead.pid}\n`);
  const spend = createKvSpendStorage(createFileByteStorage(flash));
  assert.is(await spend.reserve('k', 'x', 1n, 5n), 'reserved');
  assert.not.ok(existsSync(`${flash}.lock`));
});

test('a lock held by a live process: a clear error once the wait is over, nothing written', async () => {
  const flash = join(dir, 'held.json');
  const holder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 20000)'], { stdio: 'ignore' });
  try {
    writeFileSync(`${flash}.lock`, `${holder.pid}\n`);
    const spend = createKvSpendStorage(createFileByteStorage(flash, { lockTimeoutMs: 300 }));
    assert.throws(() => spend.reserve('k', 'x', 1n, 5n), new RegExp(`locked by process ${holder.pid}`));
    assert.not.ok(existsSync(flash), 'nothing was written');
  } finally {
    holder.kill();
  }
});

test.after(() => rmSync(dir, { recursive: true, force: true }));
test.run();
