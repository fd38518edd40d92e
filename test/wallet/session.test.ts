import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  createSession,
  verifyCtl,
  CtlBudgetExceededError,
  CtlGrantRevokedError,
  CtlError,
  createMemorySpendStorage,
} from '../../src/index.js';
import { spendStorageConformance } from '../../src/testing/spend-storage-conformance.js';
import { keys, grant, fakeAuthority, T0, HOUR, type Keys } from '../helpers/fixtures.js';

let k: Keys;
test.before(async () => {
  k = await keys();
});

const codeOf = (code: string) => (e: unknown) => e instanceof CtlError && e.code === code;

async function rejects(p: Promise<unknown>, check: (e: unknown) => boolean, why: string) {
  try {
    await p;
  } catch (e) {
    assert.ok(check(e), `${why}: got ${(e as Error)?.name} ${(e as CtlError)?.code} ${(e as Error)?.message}`);
    return;
  }
  assert.unreachable(`${why}: resolved`);
}

for (const c of spendStorageConformance(() => createMemorySpendStorage()))
  test(`memory SpendStorage: ${c.name}`, c.run);

test(
  'a signing key that failed to prepare is not kept: the next createSba prepares again, ' +
    'and the failed one spent nothing',
  async () => {
    const g = await grant(k);
    const a = fakeAuthority(k);
    const options = {
      actorId: 'vehicle-42',
      signingKey: k.authority.privateKeyPem,
      ceiling: { amount: '100', currency: 'USD' },
      fetch: a.fetch,
      now: () => T0,
    };
    const s = createSession(g, options);
    const pay = { amount: '60', currency: 'USD', rail: 'x402', merchantId: 'merchant-a', purpose: 'api:search' };
    await rejects(
      s.createSba(pay),
      (e) => e instanceof RangeError && /grant\.actorKey/.test((e as Error).message),
      'a key other than grant.actorKey',
    );
    assert.equal(await s.remaining(), { remainingMinor: '100' });
    options.signingKey = k.actor.privateKeyPem;
    assert.is((await s.createSba(pay)).authorization.maxAmountMinor, '60');
    assert.equal(await s.remaining(), { remainingMinor: '40' });
  },
);

test('createSba signs SBAs a merchant verifies, and never passes the ceiling', async () => {
  const g = await grant(k);
  const a = fakeAuthority(k);
  const s = createSession(g, {
    actorId: 'vehicle-42',
    signingKey: k.actor.privateKeyPem,
    ceiling: { amount: '100', currency: 'USD' },
    fetch: a.fetch,
    now: () => T0,
  });
  const sba = await s.createSba({
    amount: '60',
    currency: 'USD',
    rail: 'x402',
    merchantId: 'merchant-a',
    purpose: 'api:search',
  });
  assert.is(sba.authorization.maxAmountMinor, '60');
  assert.is(sba.authorization.budgetScope, 'SESSION');
  assert.ok(/^[0-9a-f]{64}$/.test(sba.authorization.intentHash!), 'intentHash set when the merchant is known');
  assert.equal(await s.remaining(), { remainingMinor: '40' });
  const r = await verifyCtl(sba, {
    amount: '60',
    currency: 'USD',
    merchantId: 'merchant-a',
    signingKeyPem: k.authority.publicKeyPem,
    fetch: a.fetch,
    now: () => T0,
    requireIntentHash: true,
  });
  assert.ok(r.valid, JSON.stringify(r));
  await rejects(
    s.createSba({ amount: '41', currency: 'USD', rail: 'x402' }),
    (e) => e instanceof CtlBudgetExceededError && (e as CtlError).code === 'budget_exceeded',
    'over the ceiling',
  );
  assert.equal(await s.remaining(), { remainingMinor: '40' }, 'a refused SBA reserves nothing');
  await s.createSba({ amount: '40', currency: 'USD', rail: 'x402' });
  assert.equal(await s.remaining(), { remainingMinor: '0' });
});

test('concurrent createSba never overspends: 50 parallel × 10 against 100 → exactly 10', async () => {
  const g = await grant(k);
  const a = fakeAuthority(k);
  const s = createSession(g, {
    actorId: 'agent',
    signingKey: k.actor.privateKeyPem,
    ceiling: { amount: '100', currency: 'USD' },
    fetch: a.fetch,
    now: () => T0,
  });
  const results = await Promise.allSettled(
    Array.from({ length: 50 }, () => s.createSba({ amount: '10', currency: 'USD', rail: 'card' })),
  );
  assert.is(results.filter((r) => r.status === 'fulfilled').length, 10);
  assert.ok(
    results
      .filter((r) => r.status === 'rejected')
      .every((r) => (r as PromiseRejectedResult).reason instanceof CtlBudgetExceededError),
  );
  assert.equal(await s.remaining(), { remainingMinor: '0' });
  assert.is(a.state.calls, 1, 'concurrent revocation checks are coalesced into one request');
});

test('revocation: refused before signing, terminal for the session, cached for revocationTtl', async () => {
  const g = await grant(k);
  const a = fakeAuthority(k);
  let now = T0;
  const s = createSession(g, {
    actorId: 'agent',
    signingKey: k.actor.privateKeyPem,
    revocationTtl: 1000,
    fetch: a.fetch,
    now: () => now,
  });
  await s.createSba({ amount: '1', currency: 'USD', rail: 'card' });
  a.revoke(g.grantId);
  await s.createSba({ amount: '1', currency: 'USD', rail: 'card' }); // still inside the TTL: cached "not revoked"
  assert.is(a.state.calls, 1);
  now += 1000;
  await rejects(
    s.createSba({ amount: '1', currency: 'USD', rail: 'card' }),
    (e) => e instanceof CtlGrantRevokedError && (e as CtlError).code === 'grant_revoked',
    'revoked',
  );
  assert.is(a.state.calls, 2);
  await rejects(
    s.createSba({ amount: '1', currency: 'USD', rail: 'card' }),
    (e) => e instanceof CtlGrantRevokedError,
    'terminal',
  );
  assert.is(a.state.calls, 2, 'no request after the terminal refusal');
  assert.equal(await s.remaining(), { remainingMinor: '4998' });
});

test(
  'revocation check fails closed: unreachable or slow authority → revocation_unavailable, ' + 'nothing reserved',
  async () => {
    const g = await grant(k);
    const a = fakeAuthority(k);
    a.state.fail = true;
    const s = createSession(g, { actorId: 'agent', signingKey: k.actor.privateKeyPem, fetch: a.fetch, now: () => T0 });
    await rejects(
      s.createSba({ amount: '5', currency: 'USD', rail: 'card' }),
      codeOf('revocation_unavailable'),
      'unreachable',
    );
    const g2 = await grant(k);
    const b = fakeAuthority(k);
    b.state.stallMs = 300;
    const s2 = createSession(g2, {
      actorId: 'agent',
      signingKey: k.actor.privateKeyPem,
      fetch: b.fetch,
      now: () => T0,
      revocationTimeoutMs: 50,
    });
    await rejects(
      s2.createSba({ amount: '5', currency: 'USD', rail: 'card' }),
      codeOf('revocation_unavailable'),
      'timeout',
    );
    assert.is(b.state.calls, 0, 'refused by the timeout, before the stalled answer came');
    assert.equal(await s.remaining(), { remainingMinor: '5000' });
  },
);

test('local policy refusals carry their codes and reserve nothing', async () => {
  const g = await grant(k);
  const a = fakeAuthority(k);
  const s = createSession(g, { actorId: 'agent', signingKey: k.actor.privateKeyPem, fetch: a.fetch, now: () => T0 });
  await rejects(s.createSba({ amount: '5', currency: 'EUR', rail: 'card' }), codeOf('currency_mismatch'), 'currency');
  await rejects(s.createSba({ amount: '5', currency: 'USD', rail: 'wire' }), codeOf('rail_not_allowed'), 'rail');
  await rejects(
    s.createSba({ amount: '5', currency: 'USD', rail: 'card', merchantId: 'merchant-z' }),
    codeOf('destination_not_allowed'),
    'merchant',
  );
  await rejects(
    s.createSba({ amount: '5', currency: 'USD', rail: 'card', purpose: 'food:lunch' }),
    codeOf('purpose_not_allowed'),
    'purpose',
  );
  await rejects(s.createSba({ amount: '0', currency: 'USD', rail: 'card' }), codeOf('malformed'), 'zero');
  await rejects(s.createSba({ amount: '1.5', currency: 'USD', rail: 'card' }), codeOf('malformed'), 'fraction');
  await rejects(
    s.createSba({ amount: 5 as unknown as string, currency: 'USD', rail: 'card' }),
    codeOf('malformed'),
    'number',
  );
  assert.equal(await s.remaining(), { remainingMinor: '5000' });
  const expired = createSession(g, {
    actorId: 'agent',
    signingKey: k.actor.privateKeyPem,
    fetch: a.fetch,
    now: () => T0 + 25 * HOUR,
  });
  await rejects(expired.createSba({ amount: '5', currency: 'USD', rail: 'card' }), codeOf('grant_expired'), 'expired');
});

test('misuse throws TypeError/RangeError naming the option', async () => {
  const g = await grant(k);
  assert.throws(() => createSession(g, { actorId: '', signingKey: k.actor.privateKeyPem }), /actorId/);
  assert.throws(
    () =>
      createSession(g, {
        actorId: 'a',
        signingKey: k.actor.privateKeyPem,
        ceiling: { amount: '9999', currency: 'USD' },
      }),
    /ceiling/,
  );
  assert.throws(
    () =>
      createSession(g, { actorId: 'a', signingKey: k.actor.privateKeyPem, ceiling: { amount: '10', currency: 'EUR' } }),
    /currency/,
  );
  const wrongKey = createSession(g, {
    actorId: 'a',
    signingKey: k.actorP256.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now: () => T0,
  });
  await rejects(
    wrongKey.createSba({ amount: '1', currency: 'USD', rail: 'card' }),
    (e) => e instanceof RangeError,
    'key is not the actorKey',
  );
  assert.equal(await wrongKey.remaining(), { remainingMinor: '5000' }, 'a failed signature releases its reservation');
});

test('a persisted SpendStorage carries spend across wallet restarts', async () => {
  const g = await grant(k);
  const a = fakeAuthority(k);
  const storage = createMemorySpendStorage();
  const open = () =>
    createSession(g, {
      actorId: 'v',
      sessionId: 'trip-7',
      signingKey: k.actor.privateKeyPem,
      spendStorage: storage,
      ceiling: { amount: '100', currency: 'USD' },
      fetch: a.fetch,
      now: () => T0,
    });
  await open().createSba({ amount: '70', currency: 'USD', rail: 'card' });
  const again = open();
  assert.equal(await again.remaining(), { remainingMinor: '30' });
  await rejects(
    again.createSba({ amount: '31', currency: 'USD', rail: 'card' }),
    (e) => e instanceof CtlBudgetExceededError,
    'after restart',
  );
});

test('ES256 actor keys sign SBAs too', async () => {
  const g = await grant(k, { actorKey: k.actorP256.publicKeyPem });
  assert.is(g.actorKey.kty, 'EC');
  const a = fakeAuthority(k);
  const s = createSession(g, { actorId: 'v', signingKey: k.actorP256.privateKeyPem, fetch: a.fetch, now: () => T0 });
  const sba = await s.createSba({ amount: '9', currency: 'USD', rail: 'card' });
  const r = await verifyCtl(sba, {
    amount: '9',
    currency: 'USD',
    signingKeyPem: k.authority.publicKeyPem,
    offline: true,
    now: () => T0,
  });
  assert.ok(r.valid, JSON.stringify(r));
});

test('grant velocity (PROTOCOL.md §8): payments per hour and amount per merchant per day', async () => {
  const g = await grant(k, { velocity: { maxPaymentsPerHour: 3, maxAmountPerMerchantPerDay: '50' } });
  const a = fakeAuthority(k);
  let now = T0;
  const s = createSession(g, {
    actorId: 'v',
    signingKey: k.actor.privateKeyPem,
    fetch: a.fetch,
    now: () => now,
    revocationTtl: 10 * HOUR,
  });
  await s.createSba({ amount: '30', currency: 'USD', rail: 'card', merchantId: 'merchant-a' });
  await rejects(
    s.createSba({ amount: '21', currency: 'USD', rail: 'card', merchantId: 'merchant-a' }),
    codeOf('velocity_exceeded'),
    'per merchant per day',
  );
  await s.createSba({ amount: '21', currency: 'USD', rail: 'card', merchantId: 'merchant-b' });
  await s.createSba({ amount: '1', currency: 'USD', rail: 'card', merchantId: 'merchant-b' });
  await rejects(
    s.createSba({ amount: '1', currency: 'USD', rail: 'card', merchantId: 'merchant-b' }),
    codeOf('velocity_exceeded'),
    '4th payment in the hour',
  );
  assert.equal(await s.remaining(), { remainingMinor: String(5000 - 52) }, 'refused payments reserve nothing');
  now += HOUR;
  await s.createSba({ amount: '1', currency: 'USD', rail: 'card', merchantId: 'merchant-b' });
});

test.run();
