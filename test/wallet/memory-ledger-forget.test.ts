// The memory SpendStorage forgets ids that can no longer be replayed (PROTOCOL.md §12) without a
// pass over the whole ledger on every reserve: in-order expiries go at once, out-of-order ones at
// the next full pass (when the ledger has doubled), and a live id is never forgotten.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createMemorySpendStorage } from '../../src/wallet/spend-storage.js';

const C = 10n ** 30n;

test('in-order expiries are forgotten as soon as they pass; live ids never', async () => {
  const s = createMemorySpendStorage();
  assert.is(await s.reserve('g', 'a', 1n, C, { expiresAt: 50, now: 0 }), 'reserved');
  assert.is(await s.reserve('g', 'b', 1n, C, { expiresAt: 100, now: 0 }), 'reserved');
  assert.is(await s.reserve('g', 'b', 1n, C, { expiresAt: 100, now: 60 }), 'duplicate', 'b is live');
  assert.is(await s.reserve('g', 'a', 1n, C, { expiresAt: 200, now: 60 }), 'reserved', 'a expired at 50: forgotten');
  assert.is(await s.total('g'), 3n, 'the totals are kept forever');
});

test(
  'an out-of-order expiry is kept a little longer (still refused as a replay), then ' + 'forgotten at the full pass',
  async () => {
    const s = createMemorySpendStorage();
    await s.reserve('g', 'late', 1n, C, { expiresAt: 1_000_000, now: 0 });
    await s.reserve('g', 'early', 1n, C, { expiresAt: 50, now: 0 });
    assert.is(await s.reserve('g', 'early', 1n, C, { expiresAt: 50, now: 60 }), 'duplicate', 'behind a live id: kept');
    for (let i = 0; i < 100; i++) await s.reserve('g', `x${i}`, 1n, C, { expiresAt: 1_000_000, now: 60 });
    assert.is(await s.reserve('g', 'early', 1n, C, { expiresAt: 500, now: 60 }), 'reserved', 'the full pass forgot it');
    assert.is(
      await s.reserve('g', 'late', 1n, C, { expiresAt: 1_000_000, now: 60 }),
      'duplicate',
      'live ids survive the full pass',
    );
  },
);

test.run();
