// verifySignedSessionBudgetAuthorizationForDecision: stateful last (PROTOCOL.md §7) and the
// decision's expiry on the floored time (PROTOCOL.md §12).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  createSession, createMemorySpendStorage, createMemoryTimeFloor, verifySignedSessionBudgetAuthorizationForDecision as verifyForDecision,
  formatTimestamp, type SignedBudgetAuthorization, type SpendStorage,
} from '../../src/index.js';
import { keys, grant, fakeAuthority, T0, type Keys } from '../helpers/fixtures.js';

let k: Keys;
test.before(async () => {
  k = await keys();
});

async function signedSba(): Promise<SignedBudgetAuthorization> {
  // An offline allowance too, so the offline ledgers are watched as well as the grant budget.
  const g = await grant(k, { offline: { maxPayments: 5, maxAmountMinor: '1000' } });
  const s = createSession(g, { actorId: 'vehicle-42', signingKey: k.actor.privateKeyPem, fetch: fakeAuthority(k).fetch, now: () => T0 });
  return s.createSba({ amount: '30', currency: 'USD', rail: 'x402', merchantId: 'merchant-a', purpose: 'api:search' });
}

function setup(sba: SignedBudgetAuthorization, spendStorage: SpendStorage) {
  const a = sba.authorization;
  const decision = {
    action: 'ALLOW', reasons: [], policyHash: a.policyHash, expiresAtISO: formatTimestamp(T0 + 60_000), decisionId: 'd1',
    sessionGrantId: a.grantId, priceFiat: { amountMinor: '30', currency: 'USD' },
  };
  const opts = {
    sessionId: a.sessionId, decision, offline: true, signingKeyPem: k.authority.publicKeyPem, merchantId: 'merchant-a',
    now: () => T0, trackSpend: true, spendStorage,
  };
  return { decision, opts };
}

/** A memory storage that counts the reservations asked of it (every ledger: budget, offline, velocity). */
function spyStorage() {
  const inner = createMemorySpendStorage();
  const spy = { reserves: 0, storage: undefined as unknown as SpendStorage };
  spy.storage = {
    reserve: (...a) => (spy.reserves++, inner.reserve(...a)),
    commit: (...a) => inner.commit(...a),
    release: (...a) => inner.release(...a),
    total: (...a) => inner.total(...a),
  };
  return spy;
}

test('a decision refused for any of its own reasons spends nothing: the SBA stays usable', async () => {
  const sba = await signedSba();
  const spy = spyStorage();
  const storage = spy.storage;
  const { decision, opts } = setup(sba, storage);
  const refusals: [string, Parameters<typeof verifyForDecision>[1], string][] = [
    ['not ALLOW', { ...opts, decision: { ...decision, action: 'DENY' } }, 'malformed'],
    ['another session', { ...opts, sessionId: 'sess_other' }, 'malformed'],
    ['another grant', { ...opts, decision: { ...decision, sessionGrantId: 'grant_other' } }, 'malformed'],
    ['another policy', { ...opts, decision: { ...decision, policyHash: 'f'.repeat(64) } }, 'policy_hash_mismatch'],
    ['expired decision', { ...opts, decision: { ...decision, expiresAtISO: formatTimestamp(T0) } }, 'sba_expired'],
    ['spent so far + price over the authorization', { ...opts, cumulativeSpentMinor: '1' }, 'budget_exceeded'],
    ['a bad cumulativeSpentMinor', { ...opts, cumulativeSpentMinor: '-1' }, 'malformed'],
    ['a bad price', { ...opts, decision: { ...decision, priceFiat: { amountMinor: '1e1', currency: 'USD' } } }, 'malformed'],
    ['a bad expiry', { ...opts, decision: { ...decision, expiresAtISO: 'tomorrow' } }, 'malformed'],
  ];
  for (const [why, o, code] of refusals) {
    const r = await verifyForDecision(sba, o);
    assert.is(!r.ok && r.error.code, code, why);
    assert.is(spy.reserves, 0, `${why}: no ledger asked to reserve anything`);
    assert.is(await storage.total(`grant:${sba.grant.grantId}`), 0n, `${why}: cumulative spend unchanged`);
  }
  const ok = await verifyForDecision(sba, opts);
  assert.ok(ok.ok, `the SBA is still usable after the refusals: ${JSON.stringify(ok)}`);
  assert.ok(spy.reserves > 0);
  assert.is(await storage.total(`grant:${sba.grant.grantId}`), 30n, 'the accepted payment counted once');
  const again = await verifyForDecision(sba, opts);
  assert.is(!again.ok && again.error.code, 'replay', 'spend is tracked: the test could see a burned SBA');
});

test('the decision expiry is checked against max(clock, time floor)', async () => {
  const sba = await signedSba();
  const { decision, opts } = setup(sba, createMemorySpendStorage());
  // The decision expired at T0 + 60 s; the floor has seen T0 + 120 s; the clock was set back to T0.
  // The SBA (5 minutes) and the grant are still valid at the floor.
  const timeFloor = createMemoryTimeFloor(T0 + 120_000);
  const r = await verifyForDecision(sba, { ...opts, timeFloor });
  assert.is(!r.ok && r.error.code, 'sba_expired');
  assert.match(!r.ok ? r.error.message : '', /decision expired/);
  // A decision still valid at the floor passes, on the same floor and clock.
  const fresh = { ...decision, expiresAtISO: formatTimestamp(T0 + 180_000) };
  const ok = await verifyForDecision(sba, { ...opts, decision: fresh, timeFloor });
  assert.ok(ok.ok, JSON.stringify(ok));
});

test('a refusal by the decision expiry keeps the clock reading in the floor', async () => {
  const sba = await signedSba();
  const { decision, opts } = setup(sba, createMemorySpendStorage());
  const timeFloor = createMemoryTimeFloor(T0);
  const late = T0 + 30_000; // under a minute past the floor: not otherwise written
  const r = await verifyForDecision(sba, { ...opts, now: () => late, timeFloor, decision: { ...decision, expiresAtISO: formatTimestamp(T0 + 10_000) } });
  assert.is(!r.ok && r.error.code, 'sba_expired');
  assert.is(await timeFloor.get(), late);
});

test('a time that is not a number refuses the decision, never "no expiry"', async () => {
  const sba = await signedSba();
  const storage = createMemorySpendStorage();
  const { decision, opts } = setup(sba, storage);
  const expired = { ...decision, expiresAtISO: formatTimestamp(T0) };
  for (const clockToleranceMs of [NaN, '0', {}, -1, Infinity]) {
    for (const d of [decision, expired]) {
      const r = await verifyForDecision(sba, { ...opts, decision: d, clockToleranceMs } as never);
      assert.is(!r.ok && r.error.code, 'malformed', `clockToleranceMs ${String(clockToleranceMs)}`);
    }
  }
  // A clock that reads NaN: refused (malformed where the clock is read, else by the expiry check).
  const r = await verifyForDecision(sba, { ...opts, decision: expired, now: () => NaN });
  assert.ok(!r.ok && ['malformed', 'sba_expired'].includes(r.error.code), JSON.stringify(r));
  assert.is(await storage.total(`grant:${sba.grant.grantId}`), 0n, 'nothing recorded');
});

test('the decision is read once: a getter cannot show the checks one price and the verifier another', async () => {
  const sba = await signedSba();
  const { decision, opts } = setup(sba, createMemorySpendStorage());
  let reads = 0;
  const priceFiat = { currency: 'USD', get amountMinor() { return reads++ === 0 ? '30' : '31'; } };
  const r = await verifyForDecision(sba, { ...opts, decision: { ...decision, priceFiat } as never });
  assert.ok(r.ok, JSON.stringify(r));
  assert.is(reads, 1);
});

test.run();
