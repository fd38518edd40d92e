// A wallet's running total belongs to the grant (PROTOCOL.md §12): every session of one grant on
// one SpendStorage draws on the grant's maxAmountMinor, across process restarts, and a session's
// own ceiling is a second bound inside it.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSession, createMemorySpendStorage, CtlBudgetExceededError, CtlError } from '../../src/index.js';
import { createKvSpendStorage } from '../../firmware-bridge/kv-spend-storage.js';
import { createFileByteStorage } from '../../firmware-bridge/node/file-storage.js';
import { keys, grant, fakeAuthority, T0, type Keys } from '../helpers/fixtures.js';

let k: Keys;
const dir = mkdtempSync(join(tmpdir(), 'ctl-wallet-grant-'));
test.before(async () => {
  k = await keys();
});
test.after(() => rmSync(dir, { recursive: true, force: true }));

/** Signs `amount` once; the amount signed, or 0 when the wallet refused for the budget. */
async function trySign(s: ReturnType<typeof createSession>, amount: string): Promise<bigint> {
  try {
    return BigInt((await s.createSba({ amount, currency: 'USD', rail: 'card' })).authorization.maxAmountMinor);
  } catch (e) {
    assert.ok(e instanceof CtlBudgetExceededError, `refused for the budget, got ${(e as Error).message}`);
    return 0n;
  }
}

test('three process starts over one flash file, each signing 5,000 under a 5,000 grant: 5,000 in all', async () => {
  const g = await grant(k); // maxAmountMinor 5000
  const a = fakeAuthority(k);
  const path = join(dir, 'flash.json');
  let signed = 0n;
  for (let start = 0; start < 3; start++) {
    // A new process: a fresh storage handle over the same file, a fresh (random) session id.
    const spendStorage = createKvSpendStorage(createFileByteStorage(path));
    const s = createSession(g, {
      actorId: 'vehicle-42',
      signingKey: k.actor.privateKeyPem,
      spendStorage,
      fetch: a.fetch,
      now: () => T0,
    });
    signed += await trySign(s, '5000');
    assert.equal(await s.remaining(), { remainingMinor: '0' }, `start ${start + 1} sees the grant spent`);
  }
  assert.is(signed, 5000n);
});

test('a session ceiling below the grant still bounds that session; the grant bounds them all', async () => {
  const g = await grant(k);
  const a = fakeAuthority(k);
  const spendStorage = createMemorySpendStorage();
  const open = (ceiling?: string) =>
    createSession(g, {
      actorId: 'agent',
      signingKey: k.actor.privateKeyPem,
      spendStorage,
      fetch: a.fetch,
      now: () => T0,
      ...(ceiling ? { ceiling: { amount: ceiling, currency: 'USD' } } : {}),
    });
  const small = open('1000');
  assert.is(await trySign(small, '1000'), 1000n);
  assert.is(await trySign(small, '1'), 0n, 'its own ceiling is spent though the grant has room');
  assert.equal(await small.remaining(), { remainingMinor: '0' });
  const other = open('3000');
  assert.equal(await other.remaining(), { remainingMinor: '3000' });
  assert.is(await trySign(other, '3000'), 3000n);
  const third = open();
  assert.equal(await third.remaining(), { remainingMinor: '1000' }, 'the grant has 1,000 left');
  assert.is(await trySign(third, '1001'), 0n);
  assert.is(await trySign(third, '1000'), 1000n);
  assert.is(await trySign(open(), '1'), 0n, 'the grant is spent for every session');
});

test('sessions of one grant signing at once never pass the grant: 2 × 40 parallel × 100 under 5,000 → 50', async () => {
  const g = await grant(k);
  const a = fakeAuthority(k);
  const spendStorage = createMemorySpendStorage();
  const sessions = [0, 1].map(() =>
    createSession(g, {
      actorId: 'agent',
      signingKey: k.actor.privateKeyPem,
      spendStorage,
      fetch: a.fetch,
      now: () => T0,
    }),
  );
  const results = await Promise.all(sessions.flatMap((s) => Array.from({ length: 40 }, () => trySign(s, '100'))));
  assert.is(
    results.reduce((x, y) => x + y, 0n),
    5000n,
  );
});

test('a refusal by the grant leaves the session ceiling untouched (all or nothing)', async () => {
  const g = await grant(k);
  const a = fakeAuthority(k);
  const spendStorage = createMemorySpendStorage();
  const first = createSession(g, {
    actorId: 'agent',
    signingKey: k.actor.privateKeyPem,
    spendStorage,
    fetch: a.fetch,
    now: () => T0,
  });
  assert.is(await trySign(first, '4500'), 4500n);
  const s = createSession(g, {
    actorId: 'agent',
    sessionId: 'trip-1',
    signingKey: k.actor.privateKeyPem,
    spendStorage,
    ceiling: { amount: '2000', currency: 'USD' },
    fetch: a.fetch,
    now: () => T0,
  });
  assert.is(await trySign(s, '600'), 0n);
  assert.is(await spendStorage.total(`${g.grantId}/trip-1`), 0n, 'the session reservation was given back');
  assert.is(await trySign(s, '500'), 500n);
});

test('a ceiling in another currency is a CtlError currency_mismatch', async () => {
  const g = await grant(k);
  let err: unknown;
  try {
    createSession(g, { actorId: 'a', signingKey: k.actor.privateKeyPem, ceiling: { amount: '10', currency: 'EUR' } });
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof CtlError, `a CtlError, got ${(err as Error)?.name}`);
  assert.is((err as CtlError).code, 'currency_mismatch');
  assert.match((err as Error).message, /EUR/);
});

test.run();
