// verifySignedSessionBudgetAuthorizationForDecision: stateful last (PROTOCOL.md §7) and the
// decision's expiry on the floored time (PROTOCOL.md §12).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  createSession,
  createMemorySpendStorage,
  createMemoryTimeFloor,
  verifySignedSessionBudgetAuthorizationForDecision as verifyForDecision,
  formatTimestamp,
  type SignedBudgetAuthorization,
  type SpendStorage,
} from '../../src/index.js';
import { keys, grant, fakeAuthority, T0, type Keys } from '../helpers/fixtures.js';

let k: Keys;
test.before(async () => {
  k = await keys();
});

async function signedSba(): Promise<SignedBudgetAuthorization> {
  // An offline allowance too, so the offline ledgers are watched as well as the grant budget.
  const g = await grant(k, { offline: { maxPayments: 5, maxAmountMinor: '1000' } });
  const s = createSession(g, {
    actorId: 'vehicle-42',
    signingKey: k.actor.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now: () => T0,
  });
  return s.createSba({ amount: '30', currency: 'USD', rail: 'x402', merchantId: 'merchant-a', purpose: 'api:search' });
}

function setup(sba: SignedBudgetAuthorization, spendStorage: SpendStorage) {
  const a = sba.authorization;
  const decision = {
    action: 'ALLOW',
    reasons: [],
    policyHash: a.policyHash,
    expiresAtISO: formatTimestamp(T0 + 60_000),
    decisionId: 'd1',
    sessionGrantId: a.grantId,
    priceFiat: { amountMinor: '30', currency: 'USD' },
  };
  const opts = {
    sessionId: a.sessionId,
    decision,
    offline: true,
    signingKeyPem: k.authority.publicKeyPem,
    merchantId: 'merchant-a',
    now: () => T0,
    trackSpend: true,
    spendStorage,
  };
  return { decision, opts };
}

async function totals(storage: SpendStorage, grantId: string) {
  return [
    await storage.total(`grant:${grantId}`),
    await storage.total(`offline-count:${grantId}@0`), // epoch 0: no bundle vouched (a pinned key)
    await storage.total(`offline-amount:${grantId}@0`),
  ];
}

test('a decision refused for any of its own reasons spends nothing: the SBA stays usable', async () => {
  const sba = await signedSba();
  const storage = createMemorySpendStorage();
  const { decision, opts } = setup(sba, storage);
  const refusals: [string, Parameters<typeof verifyForDecision>[1], string][] = [
    ['not ALLOW', { ...opts, decision: { ...decision, action: 'DENY' } }, 'malformed'],
    ['another session', { ...opts, sessionId: 'sess_other' }, 'malformed'],
    ['another grant', { ...opts, decision: { ...decision, sessionGrantId: 'grant_other' } }, 'malformed'],
    ['another policy', { ...opts, decision: { ...decision, policyHash: 'f'.repeat(64) } }, 'policy_hash_mismatch'],
    ['expired decision', { ...opts, decision: { ...decision, expiresAtISO: formatTimestamp(T0) } }, 'sba_expired'],
    ['spent so far + price over the authorization', { ...opts, cumulativeSpentMinor: '1' }, 'budget_exceeded'],
    ['a bad cumulativeSpentMinor', { ...opts, cumulativeSpentMinor: '-1' }, 'malformed'],
    [
      'a bad price',
      { ...opts, decision: { ...decision, priceFiat: { amountMinor: '1e1', currency: 'USD' } } },
      'malformed',
    ],
    ['a bad expiry', { ...opts, decision: { ...decision, expiresAtISO: 'tomorrow' } }, 'malformed'],
  ];
  for (const [why, o, code] of refusals) {
    const r = await verifyForDecision(sba, o);
    assert.is(!r.ok && r.error.code, code, why);
    assert.equal(await totals(storage, sba.grant.grantId), [0n, 0n, 0n], `${why}: nothing recorded`);
  }
  const ok = await verifyForDecision(sba, opts);
  assert.ok(ok.ok, `the SBA is still usable after the refusals: ${JSON.stringify(ok)}`);
  assert.equal(await totals(storage, sba.grant.grantId), [30n, 1n, 30n], 'the accepted payment counted once');
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
  const r = await verifyForDecision(sba, {
    ...opts,
    now: () => late,
    timeFloor,
    decision: { ...decision, expiresAtISO: formatTimestamp(T0 + 10_000) },
  });
  assert.is(!r.ok && r.error.code, 'sba_expired');
  assert.is(await timeFloor.get(), late);
});

test('a tolerance that is not a finite number is malformed, not "no expiry"', async () => {
  const sba = await signedSba();
  const { decision, opts } = setup(sba, createMemorySpendStorage());
  const expired = { ...decision, expiresAtISO: formatTimestamp(T0) };
  for (const clockToleranceMs of [NaN, '0' as unknown as number, -1]) {
    const r = await verifyForDecision(sba, { ...opts, decision: expired, clockToleranceMs });
    assert.is(!r.ok && r.error.code, 'malformed', String(clockToleranceMs));
  }
});

test('the decision is read once: a getter cannot show the checks one price and the verifier another', async () => {
  const sba = await signedSba();
  const { decision, opts } = setup(sba, createMemorySpendStorage());
  let reads = 0;
  const priceFiat = {
    currency: 'USD',
    get amountMinor() {
      return reads++ === 0 ? '30' : '31';
    },
  };
  const r = await verifyForDecision(sba, { ...opts, decision: { ...decision, priceFiat } as never });
  assert.ok(r.ok, JSON.stringify(r));
  assert.is(reads, 1);
});

test.run();
