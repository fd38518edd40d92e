/**
 * A wallet keeps its window and velocity ledgers under `wallet:`, apart from a verifier's on the
 * same SpendStorage (a device that pays and takes payments), and a storage an earlier wallet wrote
 * (those ledgers unprefixed) reopens no window that was open when this SDK first counted in it.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as CTL from '../../src/index.js';
import { createKvSpendStorage } from '../../firmware-bridge/kv-spend-storage.js';
import { createMemoryByteStorage } from '../../firmware-bridge/abi.js';
import { keys, grant, fakeAuthority, HOUR, type Keys } from '../helpers/fixtures.js';

const DAY = 24 * HOUR;
const D0 = Date.UTC(2026, 10, 22);
let k: Keys;
test.before(async () => {
  k = await keys();
});

const windowed = () =>
  grant(
    k,
    {
      maxAmountMinor: '5000',
      windows: [{ every: 'P1D', maxAmountMinor: '100', maxPayments: 3 }],
      windowsStart: CTL.formatTimestamp(D0),
      issuedAt: CTL.formatTimestamp(D0),
      expiresAt: CTL.formatTimestamp(D0 + 10 * DAY),
    },
    D0,
  );

const storages: Array<[string, () => CTL.SpendStorage]> = [
  ['memory', () => CTL.createMemorySpendStorage()],
  ['flash ledger', () => createKvSpendStorage(createMemoryByteStorage())],
];

const codeOf = async (f: () => Promise<unknown>) => {
  try {
    await f();
    return 'ok';
  } catch (e) {
    return e instanceof CTL.CtlError ? e.code : String(e);
  }
};

for (const [name, make] of storages) {
  test(`${name}: a wallet and a verifier on one storage each count a payment once`, async () => {
    const g = await windowed();
    const storage = make();
    const clock = D0 + HOUR;
    const wallet = CTL.createSession(g, {
      actorId: 'v',
      signingKey: k.actor.privateKeyPem,
      fetch: fakeAuthority(k).fetch,
      now: () => clock,
      spendStorage: storage,
    });
    const sba = await wallet.createSba({ amount: '60', currency: 'USD', rail: 'x402' });
    const r = await CTL.verifyCtl(sba, {
      amount: '60',
      currency: 'USD',
      trackSpend: true,
      signingKeyPem: k.authority.publicKeyPem,
      fetch: fakeAuthority(k).fetch,
      spendStorage: storage,
      now: () => clock,
    });
    assert.ok(r.valid, JSON.stringify(!r.valid && r.error));
    assert.equal((await wallet.remaining()).windows?.[0]?.remainingMinor, '40');
  });

  test(`${name}: windows an earlier wallet counted unprefixed stay counted; later ones start empty`, async () => {
    const g = await windowed();
    const storage = make();
    // What an earlier wallet left: 60 under the grant, in day 0's window (then unprefixed keys).
    const id = `wallet:${g.grantId}/sess_old|bud_old`;
    const r = await storage.reserveMany!(
      id,
      [
        { key: `wallet:${g.grantId}`, amount: 60n, ceiling: 5000n },
        { key: `window:${g.grantId}:P1D:0`, amount: 60n, ceiling: 100n },
        { key: `window-count:${g.grantId}:P1D:0`, amount: 1n, ceiling: 3n, count: true },
      ],
      { now: D0 + HOUR },
    );
    assert.equal(r, { result: 'reserved' });
    await storage.commitMany!(id);
    let clock = D0 + 2 * HOUR;
    const wallet = CTL.createSession(g, {
      actorId: 'v',
      signingKey: k.actor.privateKeyPem,
      fetch: fakeAuthority(k).fetch,
      now: () => clock,
      spendStorage: storage,
    });
    const pay = (amount: string) => codeOf(() => wallet.createSba({ amount, currency: 'USD', rail: 'x402' }));
    assert.is(await pay('50'), 'window_exceeded', 'day 0 holds the earlier 60: 110 > 100');
    assert.is(await pay('40'), 'ok');
    assert.equal((await wallet.remaining()).windows, [
      { every: 'P1D', remainingMinor: '0', remainingPayments: 1, resetsAt: CTL.formatTimestamp(D0 + DAY) },
    ]);
    clock = D0 + DAY + HOUR;
    assert.is(await pay('100'), 'ok', 'day 1 began after: only the new keys');
    assert.is((await wallet.remaining()).remainingMinor, String(5000 - 60 - 40 - 100));
  });
}

test.run();
