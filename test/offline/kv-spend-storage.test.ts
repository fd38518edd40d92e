/** The device SpendStorage passes the SDK's SpendStorage conformance, and keeps its word under CAS contention. */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spendStorageConformance } from '../../src/testing/spend-storage-conformance.js';
import { bindCounterHead, createKvSpendStorage } from '../../firmware-bridge/kv-spend-storage.js';
import { createSequenceStore } from '../../firmware-bridge/sequence-store.js';
import { createMemoryByteStorage, type ByteStorage, type MonotonicCounter } from '../../firmware-bridge/abi.js';
import { createFileByteStorage } from '../../firmware-bridge/node/file-storage.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

for (const c of spendStorageConformance(() => createKvSpendStorage(createMemoryByteStorage())))
  test(`memory flash: ${c.name}`, c.run);

const dir = mkdtempSync(join(tmpdir(), 'ctl-flash-'));
let n = 0;
for (const c of spendStorageConformance(() => createKvSpendStorage(createFileByteStorage(join(dir, `f${n++}.json`)))))
  test(`file flash: ${c.name}`, c.run);

/** A hardware monotonic counter in memory, as the device binds its ledgers to one. */
const memoryCounter = (): MonotonicCounter => {
  let v = 0;
  return { read: () => v, increment: () => ++v };
};
// The device's own configuration: ledgers bound to the counter, the head bound at provisioning.
for (const c of spendStorageConformance(() => {
  const flash = createMemoryByteStorage();
  const counter = memoryCounter();
  bindCounterHead(flash, counter);
  return createKvSpendStorage(flash, { counter, onMissingHead: 'refuse' });
}))
  test(`counter-bound flash: ${c.name}`, c.run);

// Two handles on one file, as two processes sharing it: every call alternates between them.
for (const c of spendStorageConformance(() => {
  const path = join(dir, `shared${n++}.json`);
  const a = createKvSpendStorage(createFileByteStorage(path));
  const b = createKvSpendStorage(createFileByteStorage(path));
  let flip = false;
  const pick = () => ((flip = !flip) ? a : b);
  return {
    reserve: (key, id, amount, ceiling, o) => pick().reserve(key, id, amount, ceiling, o),
    commit: (key, id) => pick().commit(key, id),
    release: (key, id) => pick().release(key, id),
    total: (key) => pick().total(key),
    reserveMany: (id, counters, o) => pick().reserveMany!(id, counters, o),
    commitMany: (id, captured, o) => pick().commitMany!(id, captured, o),
    releaseMany: (id) => pick().releaseMany!(id),
  };
}))
  test(`file flash, two handles: ${c.name}`, c.run);

test('a counter first kept by single-counter calls moves into the multi-counter record whole', async () => {
  const flash = createMemoryByteStorage();
  const s = createKvSpendStorage(flash);
  assert.is(s.reserve('grant:g', 'old', 40n, 100n, { expiresAt: 5000, now: 0 }), 'reserved');
  s.commit('grant:g', 'old');
  // The id kept in the old record (scoped by its key, as reserveAll scopes) still refuses a
  // replay, and its amount still counts.
  assert.equal(s.reserveMany!('grant:g|old', [{ key: 'grant:g', amount: 1n, ceiling: 100n }], { now: 1 }), {
    result: 'duplicate',
  });
  assert.equal(s.reserveMany!('new', [{ key: 'grant:g', amount: 61n, ceiling: 100n }], { now: 1 }), {
    result: 'exceeded',
    key: 'grant:g',
  });
  assert.equal(s.reserveMany!('new', [{ key: 'grant:g', amount: 60n, ceiling: 100n }], { now: 1 }), {
    result: 'reserved',
  });
  assert.is(s.total('grant:g'), 100n);
  // From now on the counter is one record's: a single-counter call on it would split it.
  assert.throws(() => s.reserve('grant:g', 'x', 0n, 100n), /kept by reserveMany/);
});

test('ids are kept exactly, packed under their first counter or not', async () => {
  const s = createKvSpendStorage(createMemoryByteStorage());
  const c = [{ key: 'grant:g', amount: 1n, ceiling: 100n }];
  for (const id of ['grant:g|bud_1', '|bud_1', '~x', 'bud_1', 'grant:g|', 'grant:h|bud_1']) {
    // Holds: a capture settles only a hold (PROTOCOL.md §15).
    assert.equal(s.reserveMany!(id, c, { hold: true }), { result: 'reserved' }, id);
    assert.equal(s.reserveMany!(id, c, { hold: true }), { result: 'duplicate' }, id);
  }
  assert.is(s.commitMany!('|bud_1', 1n), 'committed');
  assert.is(s.commitMany!('grant:g|bud_1', 1n), 'committed');
  s.releaseMany!('~x');
  assert.is(s.total('grant:g'), 5n);
});

test('the multi-counter record is exact when compare-and-set keeps losing', async () => {
  const flash = contended(createMemoryByteStorage());
  const s = createKvSpendStorage(flash);
  const c = (n: bigint) => [
    { key: 'a', amount: n, ceiling: 10n },
    { key: 'b', amount: 1n, ceiling: 3n, count: true },
  ];
  assert.equal(s.reserveMany!('x', c(4n), { hold: true }), { result: 'reserved' });
  assert.equal(s.reserveMany!('y', c(4n), { hold: true }), { result: 'reserved' });
  assert.equal(s.reserveMany!('z', c(4n)), { result: 'exceeded', key: 'a' });
  assert.is(s.commitMany!('x', 1n), 'committed');
  assert.equal(s.reserveMany!('z', c(4n)), { result: 'reserved' });
  assert.equal(s.reserveMany!('w', c(0n)), { result: 'exceeded', key: 'b' });
  assert.is(s.total('a'), 9n);
  assert.ok(flash.lost > 0);
});

/** A storage whose CAS loses (as to another writer) every other time, after writing that writer's value. */
function contended(inner: ByteStorage): ByteStorage & { lost: number } {
  let flip = false;
  const s = {
    lost: 0,
    get: (k: Uint8Array) => inner.get(k),
    put: (k: Uint8Array, v: Uint8Array) => inner.put(k, v),
    compareAndSet(k: Uint8Array, expected: Uint8Array | null, v: Uint8Array) {
      flip = !flip;
      if (flip) {
        s.lost++;
        return false;
      }
      return inner.compareAndSet(k, expected, v);
    },
  };
  return s;
}

test('reservations are exact when compare-and-set keeps losing', async () => {
  const storage = contended(createMemoryByteStorage());
  const spend = createKvSpendStorage(storage);
  const results = [];
  for (let i = 0; i < 15; i++) results.push(await spend.reserve('k', `id${i}`, 1n, 10n));
  assert.is(results.filter((r) => r === 'reserved').length, 10);
  assert.is(await spend.total('k'), 10n);
  assert.ok(storage.lost >= 10, 'the CAS really lost');
});

test('state survives reopening the file (a reboot)', async () => {
  const path = join(dir, 'reboot.json');
  const a = createKvSpendStorage(createFileByteStorage(path));
  await a.reserve('offline-count:g', 'b1', 1n, 2n);
  await a.commit('offline-count:g', 'b1');
  const b = createKvSpendStorage(createFileByteStorage(path));
  assert.is(await b.total('offline-count:g'), 1n);
  assert.is(await b.reserve('offline-count:g', 'b1', 1n, 2n), 'duplicate');
  assert.is(await b.reserve('offline-count:g', 'b2', 1n, 2n), 'reserved');
  assert.is(await b.reserve('offline-count:g', 'b3', 1n, 2n), 'exceeded');
});

test('a full ledger refuses rather than forgetting ids (fail closed)', async () => {
  const spend = createKvSpendStorage(createMemoryByteStorage(), { maxEntriesPerKey: 3 });
  for (const id of ['a', 'b', 'c']) assert.is(await spend.reserve('k', id, 0n, 100n), 'reserved');
  assert.is(await spend.reserve('k', 'd', 0n, 100n), 'exceeded');
  assert.is(await spend.reserve('k', 'a', 0n, 100n), 'duplicate');
});

test('a corrupt ledger record is an error, never "nothing spent"', async () => {
  const flash = createMemoryByteStorage();
  const spend = createKvSpendStorage(flash);
  flash.put(new TextEncoder().encode('spend/k'), new TextEncoder().encode('{"v":1,"total":"-5","entries":[]}'));
  assert.throws(() => spend.reserve('k', 'x', 1n, 10n), /corrupt/);
});

test('the sequence floor only rises', () => {
  const seq = createSequenceStore(createMemoryByteStorage());
  assert.is(seq.min('s'), 0);
  assert.ok(seq.raise('s', 5));
  assert.not.ok(seq.raise('s', 4));
  assert.ok(seq.raise('s', 5));
  assert.is(seq.min('s'), 5);
  assert.is(seq.min('other'), 0);
});

test.after(() => rmSync(dir, { recursive: true, force: true }));
test.run();
