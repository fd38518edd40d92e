// Attacks on holds (PROTOCOL.md §15), budget windows (§13) and the atomic multi-counter reserve:
// each test is a sequence that once let money pass a bound, lose an amount or let a replay through.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  captureCtl,
  createMemorySpendStorage,
  createSession,
  createSignedSessionBudgetAuthorization,
  generateKeyPair,
  verifyCtl,
  type SpendStorage,
} from '../../src/index.js';
import { createKvSpendStorage } from '../../firmware-bridge/kv-spend-storage.js';
import { createNodeAbi } from '../../firmware-bridge/node/test-abi.js';
import { keys, grant, fakeAuthority, T0, HOUR, type Keys } from '../helpers/fixtures.js';

let k: Keys;
test.before(async () => {
  k = await keys();
});

const holdOf = (g: Awaited<ReturnType<typeof grant>>, amount: string, budgetId: string) =>
  createSignedSessionBudgetAuthorization(
    {
      grant: g,
      sessionId: 'sess_charger',
      actorId: 'charger-user',
      maxAmountMinor: amount,
      budgetId,
      issuedAt: new Date(T0 - 1000).toISOString(),
      expiresAt: new Date(T0 + HOUR).toISOString(),
      rail: 'card',
      hold: true,
    },
    { signingKey: k.actor.privateKeyPem, now: () => T0 },
  );

// PROTOCOL.md §7: replay records are scoped to the chain that signed them. A budgetId is on the
// wire, and anyone holding a grant can sign an SBA that carries it: in either order, the victim's
// SBA is accepted and each hold is captured on its own.
for (const attackerFirst of [false, true]) {
  const when = attackerFirst ? 'before' : 'after';
  test(`another grant's hold under a live hold's budgetId (${when} it) changes nothing for the victim`, async () => {
    const storage = createMemorySpendStorage();
    const verify = (sba: unknown, amount: string) =>
      verifyCtl(sba, {
        amount,
        currency: 'USD',
        signingKeyPem: k.authority.publicKeyPem,
        offline: true,
        spendStorage: storage,
        now: () => T0,
      });
    const suffix = attackerFirst ? 'b' : 'a';
    const victim = await grant(k, { grantId: `grant_victim_${suffix}`, maxAmountMinor: '5000' });
    const other = await grant(k, { grantId: `grant_other_${suffix}`, maxAmountMinor: '5000' });
    const h = await holdOf(victim, '3000', 'bud_shared');
    const copy = await holdOf(other, '1', 'bud_shared');
    const first = await verify(attackerFirst ? copy : h, attackerFirst ? '1' : '3000');
    const second = await verify(attackerFirst ? h : copy, attackerFirst ? '3000' : '1');
    const [v, a] = attackerFirst ? [second, first] : [first, second];
    assert.ok(v.valid, `the victim's hold is accepted: ${JSON.stringify(v)}`);
    assert.ok(a.valid, "the other grant's SBA is its own payment, not a replay of the victim's");
    assert.is.not(v.valid && v.holdId, a.valid && a.holdId, 'two holds, two names');
    const c = await captureCtl(v.valid ? v.holdId! : '', '1234', { now: () => T0, spendStorage: storage });
    assert.equal(c, { captured: true, amountMinor: '1234' }, 'the capture settles the hold the merchant served');
    assert.is(await storage.total(`grant:${victim.grantId}`), 1234n);
    assert.is(await storage.total(`grant:${other.grantId}`), 1n, 'the other hold is untouched');
    const bare = await captureCtl('bud_shared', '1', { now: () => T0, spendStorage: storage });
    assert.is(!bare.captured && bare.error.code, 'malformed', 'a bare budgetId names no hold');
    const again = await verify(h, '3000');
    assert.is(!again.valid && again.error.code, 'replay', "the victim's SBA again: a replay");
  });
}

const kvStorage = (): SpendStorage => createKvSpendStorage(createNodeAbi({ now: T0 }).storage);

for (const [name, make] of [
  ['memory', createMemorySpendStorage],
  ['kv', kvStorage],
] as const) {
  test(`${name}: a time that is not a finite number forgets no id and releases no hold`, async () => {
    const s = make();
    const c = [{ key: 'grant:g', amount: 10n, ceiling: 100n }];
    assert.equal(await s.reserveMany!('grant:g|b1', c, { now: T0, expiresAt: T0 + HOUR, hold: true }), {
      result: 'reserved',
    });
    for (const now of [NaN, Infinity, -Infinity, '1' as unknown as number]) {
      let threw = false;
      try {
        await s.reserveMany!('grant:g|b2', c, { now, expiresAt: T0 + HOUR });
      } catch (e) {
        threw = e instanceof RangeError;
      }
      assert.ok(threw, `reserveMany refuses now=${String(now)}`);
      threw = false;
      try {
        await s.commitMany!('grant:g|b1', 5n, { now });
      } catch (e) {
        threw = e instanceof RangeError;
      }
      assert.ok(threw, `commitMany refuses now=${String(now)}`);
      threw = false;
      try {
        await s.reserveMany!('grant:g|b3', c, { now: T0, expiresAt: now });
      } catch (e) {
        threw = e instanceof RangeError;
      }
      assert.ok(threw, `reserveMany refuses expiresAt=${String(now)}`);
    }
    assert.is(await s.total('grant:g'), 10n, 'the hold is still reserved');
    assert.equal(await s.reserveMany!('grant:g|b1', c, { now: T0 }), { result: 'duplicate' }, 'its id still refuses');
  });

  test(`${name}: a release after the clock stepped back never gives a window back what it did not take`, async () => {
    const s = make();
    const w = (amount: bigint) => [{ key: 'window:g:PT1H:0', amount, ceiling: 10n, ledgerExpiresAt: T0 + HOUR }];
    // A hold of the whole window, alive for two days.
    assert.equal(await s.reserveMany!('a', w(10n), { now: T0, expiresAt: T0 + 48 * HOUR, hold: true }), {
      result: 'reserved',
    });
    // The clock reads past the window's retention: its ledger is dropped.
    await s.reserveMany!('b', [{ key: 'grant:g', amount: 1n, ceiling: 100n }], { now: T0 + 2 * HOUR });
    // Then it steps back into the window: a new ledger for it, taking the whole window again.
    assert.equal(await s.reserveMany!('c', w(10n), { now: T0 + 1000 }), { result: 'reserved' });
    await s.releaseMany!('a'); // the first hold, counted in the dropped ledger, goes back
    assert.equal(
      await s.reserveMany!('d', w(1n), { now: T0 + 2000 }),
      { result: 'exceeded', key: 'window:g:PT1H:0' },
      'the window still holds 10 of 10',
    );
    assert.is(await s.total('window:g:PT1H:0'), 10n);
  });
}

test('a storage with only the single-counter reserve refuses a delegation rather than half-enforce it', async () => {
  const full = createMemorySpendStorage();
  const old: SpendStorage = { reserve: full.reserve, commit: full.commit, release: full.release, total: full.total };
  const root = await grant(k, { grantId: 'grant_root_single', delegation: { maxDepth: 2 } });
  const a = fakeAuthority(k);
  const agent = createSession(root, {
    actorId: 'planner',
    signingKey: k.actor.privateKeyPem,
    fetch: a.fetch,
    now: () => T0,
  });
  const sub = await generateKeyPair();
  const d = await agent.delegate({ actorKey: sub.publicJwk, maxAmountMinor: '500', expiresAt: root.expiresAt });
  const s = createSession(d, {
    actorId: 'sub',
    signingKey: sub.privateKeyPem,
    fetch: a.fetch,
    now: () => T0,
    spendStorage: old,
  });
  let code = 'ok';
  try {
    await s.createSba({ amount: '10', currency: 'USD', rail: 'x402' });
  } catch (e) {
    code = (e as { code?: string }).code ?? String(e);
  }
  assert.is(code, 'unsupported_feature', 'PROTOCOL.md §13: a delegation needs the atomic reserve');
  assert.is(await full.total('wallet:grant_root_single'), 0n, 'nothing half counted');
});

test.run();
