/**
 * A SpendStorage serves one role (src/wallet/ledgers.ts claimStorage): each role drops what has
 * expired by its own reading of time (PROTOCOL.md §12), so on one storage a wallet's later clock
 * forgot a verifier's replay record while the verifier's floor still held the SBA valid, and the
 * SBA was accepted twice. The second role is refused, whichever comes first; two storages on one
 * flash (two prefixes) serve both.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as CTL from '../../src/index.js';
import { createKvSpendStorage } from '../../firmware-bridge/kv-spend-storage.js';
import { createMemoryByteStorage } from '../../firmware-bridge/abi.js';
import { keys, grant, fakeAuthority, HOUR, type Keys } from '../helpers/fixtures.js';

const T0 = Date.UTC(2026, 10, 22, 10);
let k: Keys;
let g: Awaited<ReturnType<typeof grant>>;
test.before(async () => {
  k = await keys();
  g = await grant(k, { maxAmountMinor: '5000' }, T0);
});

const wallet = (spendStorage: CTL.SpendStorage) =>
  CTL.createSession(g, {
    actorId: 'v',
    signingKey: k.actor.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now: () => T0 + HOUR,
    spendStorage,
  });
const verify = (sba: unknown, spendStorage: CTL.SpendStorage) =>
  CTL.verifyCtl(sba, {
    amount: '60',
    currency: 'USD',
    trackSpend: true,
    signingKeyPem: k.authority.publicKeyPem,
    fetch: fakeAuthority(k).fetch,
    spendStorage,
    now: () => T0 + HOUR,
  });
const codeOf = async (f: () => Promise<unknown>) => {
  try {
    await f();
    return 'ok';
  } catch (e) {
    return e instanceof CTL.CtlError ? e.code : String(e);
  }
};

const storages: Array<[string, () => CTL.SpendStorage]> = [
  ['memory', () => CTL.createMemorySpendStorage()],
  ['flash ledger', () => createKvSpendStorage(createMemoryByteStorage())],
];

for (const [name, make] of storages) {
  test(`${name}: a wallet's storage refuses a verifier (verifyCtl and captureCtl)`, async () => {
    const storage = make();
    const sba = await wallet(storage).createSba({ amount: '60', currency: 'USD', rail: 'x402' });
    const r = await verify(sba, storage);
    assert.is(!r.valid && r.error.code, 'unsupported_feature');
    assert.match(!r.valid ? r.error.message : '', /already serves a wallet/);
    const c = await CTL.captureCtl('grant:g|bud_x', '1', { spendStorage: storage });
    assert.is(!c.captured && c.error.code, 'unsupported_feature');
    // the wallet goes on: its storage is still its own
    assert.is(await codeOf(() => wallet(storage).createSba({ amount: '1', currency: 'USD', rail: 'x402' })), 'ok');
  });

  test(`${name}: a verifier's storage refuses a wallet`, async () => {
    const own = make();
    const storage = make();
    const sba = await wallet(own).createSba({ amount: '60', currency: 'USD', rail: 'x402' });
    assert.ok((await verify(sba, storage)).valid);
    const w = wallet(storage);
    for (const call of [
      () => w.createSba({ amount: '1', currency: 'USD', rail: 'x402' }),
      () => w.remaining(),
      () => w.capture('bud_x', '1'),
    ])
      assert.is(await codeOf(call), 'unsupported_feature');
  });
}

test('one flash, two prefixes: a device that pays and takes payments keeps two storages', async () => {
  const flash = createMemoryByteStorage();
  const mine = createKvSpendStorage(flash, { prefix: 'wallet/' });
  const taken = createKvSpendStorage(flash, { prefix: 'merchant/' });
  const sba = await wallet(mine).createSba({ amount: '60', currency: 'USD', rail: 'x402' });
  assert.ok((await verify(sba, taken)).valid);
  const again = await verify(sba, taken);
  assert.is(!again.valid && again.error.code, 'replay');
});

test.run();
