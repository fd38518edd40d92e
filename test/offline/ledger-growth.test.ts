/**
 * Ledgers forget what can no longer be replayed (PROTOCOL.md §12): a fleet grant used at one
 * charger for weeks takes any number of payments within its ceiling, and each payment writes a
 * bounded number of bytes whatever the history. The time per payment is measured in
 * bench/ledger.mjs; here the deterministic side: every payment passes, and the bytes written per
 * payment late in the history are no more than early on.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as CTL from '../../src/index.js';
import { createDevice } from '../../firmware-bridge/device.js';
import { createMemoryByteStorage, type ByteStorage, type MonotonicCounter } from '../../firmware-bridge/abi.js';
import { bindCounterHead, createKvSpendStorage } from '../../firmware-bridge/kv-spend-storage.js';
import { createNodeAbi } from '../../firmware-bridge/node/test-abi.js';
import { makeFleet, T0, HOUR } from './fleet.js';

/** A byte storage that counts the bytes of every write (put, and compare-and-set that wrote). */
function metered(inner: ByteStorage = createMemoryByteStorage()) {
  const m = {
    written: 0,
    largest: 0,
    get: (k: Uint8Array) => inner.get(k),
    put(k: Uint8Array, v: Uint8Array) {
      inner.put(k, v);
      m.written += v.length;
      m.largest = Math.max(m.largest, v.length);
    },
    compareAndSet(k: Uint8Array, e: Uint8Array | null, v: Uint8Array) {
      const ok = inner.compareAndSet(k, e, v);
      if (ok) {
        m.written += v.length;
        m.largest = Math.max(m.largest, v.length);
      }
      return ok;
    },
  };
  return m;
}

// test:slow (ledger-growth.slow.test.ts) runs the three weeks; npm test five days, the same checks.
const PAYMENTS = process.env['CTL_TEST_LONG'] === '1' ? 5000 : 1200;
const EVERY = 6 * 60_000; // one payment every 6 minutes: 5,000 payments over about three weeks

test(
  `${PAYMENTS} payments on one grant at one charger, one every 6 minutes: all pass, ` + 'bytes per payment flat',
  async () => {
    const fleet = await makeFleet(CTL, {
      offline: { maxPayments: 1_000_000, maxAmountMinor: '100000000' },
      maxAmountMinor: '100000000',
      bundleTtlMs: 48 * HOUR,
    });
    const flash = metered();
    const abi = createNodeAbi({ now: T0, storage: flash });
    const device = createDevice(CTL, abi);
    device.provisionRoot({ rootPublicKeyPem: fleet.root.publicKeyPem });
    const perPayment: number[] = [];
    const largestPerPayment: number[] = [];
    let sequence = 0;
    let first: unknown;
    let last: unknown;
    for (let i = 0; i < PAYMENTS; i++) {
      const at = T0 + i * EVERY;
      abi.setNow(at);
      // a fresh bundle daily
      if (i % 240 === 0)
        await device.installBundle({ bundle: await fleet.bundle(++sequence, { issuedAt: at - HOUR }) });
      const sba = await fleet.sba('100', at);
      first ??= sba;
      last = sba;
      const before = flash.written;
      flash.largest = 0;
      const r = await device.verify({ sba, amount: '100', currency: 'EUR' });
      if (!r.valid) assert.unreachable(`payment ${i + 1} refused: ${JSON.stringify(r)}`);
      perPayment.push(flash.written - before);
      largestPerPayment.push(flash.largest);
    }
    const max = (xs: number[]) => Math.max(...xs);
    const early = max(perPayment.slice(100, 200));
    const late = max(perPayment.slice(PAYMENTS - 100));
    // Ids grow by a digit or two over the run (bud_150_100 → bud_4950_100); nothing else may grow.
    assert.ok(late <= early * 1.2, `bytes per payment grew with the history: ${early} early, ${late} late`);
    assert.ok(max(perPayment) <= 8 * 1024, `a payment wrote ${max(perPayment)} bytes`);
    assert.ok(max(largestPerPayment.slice(PAYMENTS - 100)) <= 1024, `one write of ${max(largestPerPayment)} bytes`);

    const s = await device.status({ grantId: fleet.grant.grantId });
    const g = s['grant'] as Record<string, string>;
    // The offline allowance counts since the newest bundle (a fresh one restores it, PROTOCOL.md §8);
    // the grant's total, forever.
    const sinceLastBundle = PAYMENTS - Math.floor((PAYMENTS - 1) / 240) * 240;
    assert.is(g['offlinePayments'], String(sinceLastBundle), 'the offline count restarts with each fresh bundle');
    assert.is(g['acceptedMinor'], String(PAYMENTS * 100));
    // Forgetting an id never lets its SBA through again: a live one is a replay, an old one expired.
    const again = await device.verify({ sba: last, amount: '100', currency: 'EUR' });
    assert.is(!again.valid && again.error.code, 'replay');
    const old = await device.verify({ sba: first, amount: '100', currency: 'EUR' });
    assert.is(!old.valid && old.error.code, 'sba_expired');
  },
);

for (const [name, make] of [
  ['device ledger (flash)', () => createKvSpendStorage(createMemoryByteStorage())],
  ['SDK memory ledger', () => CTL.createMemorySpendStorage()],
] as const) {
  test(`${name}: an id is remembered until its SBA has expired, then forgotten; the total stays`, async () => {
    const spend = make();
    assert.is(await spend.reserve('k', 'a', 1n, 100n, { expiresAt: 1000, now: 0 }), 'reserved');
    assert.is(
      await spend.reserve('k', 'a', 1n, 100n, { expiresAt: 1000, now: 999 }),
      'duplicate',
      'still live: a replay',
    );
    assert.is(await spend.reserve('k', 'b', 1n, 100n, { expiresAt: 5000, now: 1000 }), 'reserved');
    // Only an expired id can be forgotten; were it presented, the verifier refuses it as expired.
    assert.is(
      await spend.reserve('k', 'a', 1n, 100n, { expiresAt: 6000, now: 1000 }),
      'reserved',
      'a was forgotten at its expiry',
    );
    assert.is(await spend.reserve('k', 'b', 1n, 100n, { now: 4999 }), 'duplicate');
    assert.is(await spend.total('k'), 3n);
    // Without expiry an id is kept forever (callers that give no options keep the old behaviour).
    assert.is(await spend.reserve('k', 'forever', 1n, 100n), 'reserved');
    assert.is(await spend.reserve('k', 'forever', 1n, 100n, { now: Number.MAX_SAFE_INTEGER }), 'duplicate');
  });
}

test('SDK memory ledger: a velocity window is dropped whole once it has ended, not before', async () => {
  const spend = CTL.createMemorySpendStorage();
  const w = { ledgerExpiresAt: 3_600_000 };
  assert.is(await spend.reserve('velocity-hour:g:0', 'a', 1n, 2n, { ...w, now: 10 }), 'reserved');
  assert.is(await spend.reserve('grant:g', 'a', 5n, 100n, { now: 10 }), 'reserved');
  assert.is(await spend.reserve('velocity-hour:g:0', 'b', 1n, 2n, { ...w, now: 3_599_999 }), 'reserved');
  assert.is(await spend.total('velocity-hour:g:0'), 2n, 'kept while the window is open');
  assert.is(
    await spend.reserve('velocity-hour:g:1', 'c', 1n, 2n, { ledgerExpiresAt: 7_200_000, now: 3_600_000 }),
    'reserved',
  );
  assert.is(await spend.total('velocity-hour:g:0'), 0n, 'the ended window is gone');
  assert.is(await spend.total('velocity-hour:g:1'), 1n);
  assert.is(await spend.total('grant:g'), 5n, 'a ledger that does not end is kept forever');
});

test(
  'device ledger: more live SBAs at once than the bound is refused (fail closed), expired ' + 'ones make room',
  async () => {
    const spend = createKvSpendStorage(createMemoryByteStorage(), { maxEntriesPerKey: 3 });
    for (const id of ['a', 'b', 'c'])
      assert.is(await spend.reserve('k', id, 0n, 100n, { expiresAt: 100, now: 0 }), 'reserved');
    assert.is(await spend.reserve('k', 'd', 0n, 100n, { expiresAt: 200, now: 99 }), 'exceeded');
    assert.is(await spend.reserve('k', 'd', 0n, 100n, { expiresAt: 200, now: 100 }), 'reserved');
  },
);

/** A counter as a TPM NV counter behaves: it only goes up, whatever happens to the flash. */
function hardwareCounter(start = 41): MonotonicCounter & { value: number } {
  const c = { value: start, read: () => c.value, increment: () => ++c.value };
  return c;
}

const copyOf = (from: ReturnType<typeof createMemoryByteStorage>) => {
  const to = createMemoryByteStorage();
  for (const [k, v] of from.entries()) to.put(k, v);
  return to;
};

test(
  'hardware monotonic counter: a restored flash snapshot is refused instead of giving ' + 'back spent allowance',
  async () => {
    const counter = hardwareCounter();
    const flash = createMemoryByteStorage();
    const spend = createKvSpendStorage(flash, { counter });
    assert.is(await spend.reserve('offline-count:g', 'p1', 1n, 2n), 'reserved');
    const snapshot = copyOf(flash);
    await spend.commit('offline-count:g', 'p1');
    assert.is(await spend.reserve('offline-count:g', 'p2', 1n, 2n), 'reserved');
    assert.is(await spend.reserve('offline-count:g', 'p3', 1n, 2n), 'exceeded');
    assert.ok(counter.value > 41, 'writes advanced the counter');
    // The attacker puts the old flash back; the counter cannot be put back.
    const restored = createKvSpendStorage(snapshot, { counter });
    assert.throws(() => restored.reserve('offline-count:g', 'p3', 1n, 2n), /restored or altered flash/);
    // Without a counter the same restore goes unnoticed: what README.md says the bound does not cover.
    const unbound = createKvSpendStorage(copyOf(snapshot));
    assert.is(await unbound.reserve('offline-count:g', 'p3', 1n, 2n), 'reserved');
  },
);

test('hardware monotonic counter: with the head bound at provisioning, a deleted head is refused too', async () => {
  const counter = hardwareCounter();
  const flash = createMemoryByteStorage();
  bindCounterHead(flash, counter);
  const spend = createKvSpendStorage(flash, { counter, onMissingHead: 'refuse' });
  assert.is(await spend.reserve('k', 'a', 1n, 1n), 'reserved');
  const altered = createMemoryByteStorage();
  for (const [k, v] of flash.entries()) if (new TextDecoder().decode(k) !== 'ctl/spend-counter') altered.put(k, v);
  const again = createKvSpendStorage(altered, { counter, onMissingHead: 'refuse' });
  assert.throws(() => again.reserve('k', 'b', 1n, 5n), /head record is missing/);
});

test(
  'hardware monotonic counter: a write cut short between its head record and the counter ' +
    'is completed, not refused',
  async () => {
    const counter = hardwareCounter(7);
    const flash = createMemoryByteStorage();
    const failing = {
      read: () => counter.read(),
      increment: () => {
        throw new Error('power cut');
      },
    };
    const spend = createKvSpendStorage(flash, { counter: failing });
    assert.throws(() => spend.reserve('k', 'a', 1n, 10n), /power cut/); // ledger and head written, counter not
    const after = createKvSpendStorage(flash, { counter });
    assert.is(await after.reserve('k', 'a', 1n, 10n), 'duplicate', 'the cut write stands');
    assert.is(await after.reserve('k', 'b', 1n, 10n), 'reserved');
    assert.is(counter.value, 9);
  },
);

test.run();
