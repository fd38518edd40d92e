/**
 * No overspend under any interleaving (PROTOCOL.md §7): fast-check's scheduler reorders every
 * step of an async SpendStorage (the moment a reservation takes effect and the moment its answer
 * arrives) and the revocation fetch, across concurrent `session.createSba` calls and concurrent
 * `verifyCtl({ trackSpend: true })` presentations. Over 10,000 scheduled runs in total under
 * `npm run test:slow`, a quarter of them under `npm test` (fixtures.ts `runs`).
 */
import { test } from 'uvu';
import fc from 'fast-check';
import { CtlBudgetExceededError, CtlError } from '../../src/index.js';
import { createCtlCrypto } from '../../src/crypto/index.js';
import { createGrantWith } from '../../src/artifacts/grant.js';
import { createSbaWith } from '../../src/artifacts/sba.js';
import { createSessionWith } from '../../src/wallet/session.js';
import { createVerifier } from '../../src/verifier/verify.js';
import { ALL_FEATURES } from '../helpers/features.js';
import { createMemorySpendStorage, type SpendStorage } from '../../src/wallet/spend-storage.js';
import type { SignedBudgetAuthorization } from '../../src/artifacts/types.js';
import { baseGrantFields, ISSUER, makeKey, now, params, runs } from './fixtures.js';

const c = createCtlCrypto('native');
let started = 0;
test.before.each(() => {
  started = Date.now();
});
test.after.each((ctx) => {
  console.log(`  ${Date.now() - started} ms  ${ctx.__test__}`);
});
const authority = makeKey('EdDSA');
const actor = makeKey('EdDSA');
const signer = await c.importSigningKey(actor.privateKeyPem);

const WALLET_RUNS = runs(7000);
const SAME_SBA_RUNS = runs(1500);
const DISTINCT_RUNS = runs(1500);
const OFFLINE_RUNS = runs(1000);
const REPLAY_RUNS = runs(500);

/**
 * The scheduler lets every in-flight call run to its next scheduled step (one macrotask) before it
 * releases a task, so all concurrent calls are waiting at once and any of them may go next;
 * without it the first task scheduled tends to be released before the others get there.
 */
const scheduler = () =>
  fc.scheduler({
    act: async (f) => {
      await new Promise((r) => setImmediate(r));
      await f();
    },
  });

/** A SpendStorage whose every call takes effect, and answers, when the scheduler says so. */
function scheduledStorage(s: fc.Scheduler) {
  const inner = createMemorySpendStorage();
  const wrap =
    <A extends unknown[], R>(label: string, f: (...a: A) => R | Promise<R>) =>
    async (...a: A): Promise<R> => {
      await s.schedule(Promise.resolve(), `${label}(${String(a[1] ?? a[0])}) takes effect`);
      const r = await f(...a);
      return s.schedule(Promise.resolve(r), `${label}(${String(a[1] ?? a[0])}) answers ${String(r)}`);
    };
  const storage: SpendStorage = {
    reserve: wrap('reserve', inner.reserve),
    commit: wrap('commit', inner.commit),
    release: wrap('release', inner.release),
    total: wrap('total', inner.total),
  };
  return { storage, inner };
}

/** A revocation endpoint whose answers arrive when the scheduler says so. */
function scheduledFetch(s: fc.Scheduler, grantId: string) {
  let calls = 0;
  const fetch = (url: string) => {
    calls++;
    return s.schedule(
      Promise.resolve({ ok: true, status: 200, text: async () => JSON.stringify({ grantId, revoked: false }) }),
      `fetch ${url}`,
    );
  };
  return { fetch, calls: () => calls };
}

// ---------------------------------------------------------------------------------------------
// Wallet: concurrent createSba

const walletGrant = await createGrantWith(
  c,
  baseGrantFields(actor.publicKeyPem, {
    grantId: 'grant-wallet',
    maxAmountMinor: '1000',
    revocationUrl: 'https://authority.example/revoke?grantId=grant-wallet',
  }),
  { issuer: ISSUER, keyId: 'authority-1', signingKey: authority.privateKeyPem },
);

test(
  'wallet: concurrent createSba never issues past the ceiling, remaining() = ceiling ' +
    `− issued (${WALLET_RUNS} scheduled runs)`,
  async () => {
    await fc.assert(
      fc.asyncProperty(
        scheduler(),
        fc.array(fc.integer({ min: 1, max: 120 }), { minLength: 1, maxLength: 5 }),
        fc.integer({ min: 0, max: 300 }),
        async (s, amounts, ceilingN) => {
          const ceiling = BigInt(ceilingN);
          const { storage, inner } = scheduledStorage(s);
          const revocation = scheduledFetch(s, walletGrant.grantId);
          const session = createSessionWith(c, walletGrant, {
            actorId: 'agent-1',
            signingKey: signer,
            signingKeyId: 'actor-1',
            ceiling: { amount: String(ceiling), currency: 'USD' },
            spendStorage: storage,
            fetch: revocation.fetch as any,
            revocationTtl: 0,
            now,
          });
          const attempts = amounts.map((a) =>
            session.createSba({ amount: String(a), currency: 'USD', rail: 'x402' }).then(
              (sba) => ({ a: BigInt(a), sba }),
              (error) => ({ a: BigInt(a), error }),
            ),
          );
          const results = await s.waitFor(Promise.all(attempts));
          let issued = 0n;
          const ids = new Set<string>();
          for (const r of results) {
            if ('sba' in r) {
              if (BigInt(r.sba.authorization.maxAmountMinor) !== r.a)
                throw new Error('SBA amount differs from the request');
              ids.add(r.sba.authorization.budgetId);
              issued += r.a;
            } else if (!(r.error instanceof CtlBudgetExceededError) || r.error.code !== 'budget_exceeded') {
              throw new Error(`unexpected refusal: ${String(r.error)}`);
            }
          }
          if (ids.size !== results.filter((r) => 'sba' in r).length) throw new Error('two SBAs share a budgetId');
          if (issued > ceiling) throw new Error(`overspend: issued ${issued} > ceiling ${ceiling}`);
          // No spurious refusal: totals only grow, so every refused amount must not fit next to what was issued.
          for (const r of results)
            if ('error' in r && issued + r.a <= ceiling)
              throw new Error(`refused ${r.a} though ${issued} + ${r.a} ≤ ${ceiling}`);
          if ((await inner.total(`${walletGrant.grantId}/${session.sessionId}`)) !== issued)
            throw new Error('the ledger total differs from what was issued');
          const { remainingMinor } = await s.waitFor(session.remaining());
          if (remainingMinor !== String(ceiling - issued))
            throw new Error(`remaining ${remainingMinor} ≠ ${ceiling} − ${issued}`);
          if (revocation.calls() < 1) throw new Error('no revocation check before signing');
        },
      ),
      params(WALLET_RUNS),
    );
  },
);

// ---------------------------------------------------------------------------------------------
// Verifier: concurrent presentations with trackSpend

const verifierGrant = await createGrantWith(
  c,
  baseGrantFields(actor.publicKeyPem, {
    grantId: 'grant-merchant',
    maxAmountMinor: '100',
    revocationUrl: 'https://authority.example/revoke?grantId=grant-merchant',
  }),
  { issuer: ISSUER, keyId: 'authority-1', signingKey: authority.privateKeyPem },
);
const offlineGrant = await createGrantWith(
  c,
  baseGrantFields(actor.publicKeyPem, {
    grantId: 'grant-offline',
    maxAmountMinor: '100',
    revocationUrl: 'https://authority.example/revoke?grantId=grant-offline',
    offline: { maxPayments: 3, maxAmountMinor: '80' },
  }),
  { issuer: ISSUER, keyId: 'authority-1', signingKey: authority.privateKeyPem },
);

const AMOUNTS = [5, 10, 17, 25, 33, 40, 50, 60, 1, 99, 100, 42];
async function pool(grant: typeof verifierGrant): Promise<SignedBudgetAuthorization[]> {
  return Promise.all(
    AMOUNTS.map((a, i) =>
      createSbaWith(
        c,
        {
          grant,
          sessionId: 'sess-1',
          actorId: 'agent-1',
          maxAmountMinor: String(a),
          budgetId: `bud-${grant.grantId}-${i}`,
          issuedAt: '2026-05-31T23:55:00Z',
          expiresAt: '2026-06-01T00:05:00Z',
          rail: 'x402',
        },
        { signingKey: signer, keyId: 'actor-1', now },
      ),
    ),
  );
}
const onlinePool = await pool(verifierGrant);
const offlinePool = await pool(offlineGrant);

const baseOptions = { currency: 'USD', signingKeyPem: authority.publicKeyPem, trackSpend: true, now, revocationTtl: 0 };

test(
  'verifier: the same SBA presented N times concurrently is accepted exactly once, the ' +
    `rest replay (${SAME_SBA_RUNS} scheduled runs)`,
  async () => {
    await fc.assert(
      fc.asyncProperty(
        scheduler(),
        fc.nat({ max: AMOUNTS.length - 1 }),
        fc.integer({ min: 2, max: 6 }),
        async (s, pick, n) => {
          const sba = onlinePool[pick]!;
          const { storage } = scheduledStorage(s);
          const revocation = scheduledFetch(s, verifierGrant.grantId);
          const verify = createVerifier(c, ALL_FEATURES);
          const amount = sba.authorization.maxAmountMinor;
          const rs = await s.waitFor(
            Promise.all(
              Array.from({ length: n }, () =>
                verify(sba, { ...baseOptions, amount, spendStorage: storage, fetch: revocation.fetch as any }),
              ),
            ),
          );
          const accepted = rs.filter((r) => r.valid).length;
          const replays = rs.filter((r) => !r.valid && r.error.code === 'replay').length;
          if (accepted !== 1 || replays !== n - 1)
            throw new Error(
              `accepted ${accepted}, replay ${replays} of ${n}: ` +
                JSON.stringify(rs.map((r) => (r.valid ? 'ok' : r.error.code))),
            );
        },
      ),
      params(SAME_SBA_RUNS),
    );
  },
);

/** Checks one run of presentations against the grant's bounds; `limits` adds the offline ledgers. */
function checkRun(
  presented: { sba: SignedBudgetAuthorization; amount: bigint }[],
  rs: Awaited<ReturnType<ReturnType<typeof createVerifier>>>[],
  max: bigint,
  limits?: { count: number; amount: bigint },
  strictReplay = true,
) {
  const acceptedIds = new Map<string, bigint>();
  rs.forEach((r, i) => {
    const id = presented[i]!.sba.authorization.budgetId;
    if (r.valid) {
      if (acceptedIds.has(id)) throw new Error(`budgetId ${id} accepted twice`);
      acceptedIds.set(id, presented[i]!.amount);
    }
  });
  const total = [...acceptedIds.values()].reduce((a, b) => a + b, 0n);
  if (total > max) throw new Error(`overspend: accepted ${total} > grant max ${max}`);
  if (limits && (acceptedIds.size > limits.count || total > limits.amount))
    throw new Error(`offline limits passed: ${acceptedIds.size} payments, ${total}`);
  rs.forEach((r, i) => {
    if (r.valid) return;
    const { sba, amount } = presented[i]!;
    const code = r.error.code;
    if (code === 'replay') {
      // Safety needs only that the id was presented elsewhere in this run; that it was *accepted* is
      // checked strictly where the verifier keeps one ledger (see the last test for the multi-ledger case).
      const seenElsewhere = presented.some(
        (p, j) => j !== i && p.sba.authorization.budgetId === sba.authorization.budgetId,
      );
      if (strictReplay ? !acceptedIds.has(sba.authorization.budgetId) : !seenElsewhere)
        throw new Error(`replay of ${sba.authorization.budgetId}, which was never accepted`);
    } else if (code === 'budget_exceeded') {
      if (strictReplay && total + amount <= max)
        throw new Error(`budget_exceeded for ${amount} though ${total} + ${amount} ≤ ${max}`);
    } else if (code === 'offline_limit_exceeded' && limits) {
      // With several ledgers a payment may be refused next to a reservation that is rolled back
      // later (reserve → release is all or nothing): a refusal under contention, never a loss.
    } else throw new Error(`unexpected refusal ${code}: ${r.error.message}`);
  });
}

const presentations = (p: SignedBudgetAuthorization[]) =>
  fc.array(
    fc.tuple(fc.nat({ max: p.length - 1 }), fc.double({ min: 0, max: 1, noNaN: true })).map(([i, f]) => {
      const max = BigInt(p[i]!.authorization.maxAmountMinor);
      return { sba: p[i]!, amount: 1n + BigInt(Math.floor(Number(max - 1n) * f)) };
    }),
    { minLength: 1, maxLength: 6 },
  );

test(
  'verifier: distinct and repeated SBAs presented concurrently never exceed the grant ' +
    `in total (${DISTINCT_RUNS} scheduled runs)`,
  async () => {
    await fc.assert(
      fc.asyncProperty(scheduler(), presentations(onlinePool), async (s, ps) => {
        const { storage } = scheduledStorage(s);
        const revocation = scheduledFetch(s, verifierGrant.grantId);
        const verify = createVerifier(c, ALL_FEATURES);
        const rs = await s.waitFor(
          Promise.all(
            ps.map((p) =>
              verify(p.sba, {
                ...baseOptions,
                amount: String(p.amount),
                spendStorage: storage,
                fetch: revocation.fetch as any,
              }),
            ),
          ),
        );
        checkRun(ps, rs, 100n);
      }),
      params(DISTINCT_RUNS),
    );
  },
);

test(
  'verifier offline: trackSpend + grant.offline ledgers stay within every bound, all ' +
    `or nothing (${OFFLINE_RUNS} scheduled runs)`,
  async () => {
    await fc.assert(
      fc.asyncProperty(scheduler(), presentations(offlinePool), async (s, ps) => {
        const { storage, inner } = scheduledStorage(s);
        const verify = createVerifier(c, ALL_FEATURES);
        const rs = await s.waitFor(
          Promise.all(
            ps.map((p) =>
              verify(p.sba, { ...baseOptions, amount: String(p.amount), spendStorage: storage, offline: true }),
            ),
          ),
        );
        checkRun(ps, rs, 100n, { count: 3, amount: 80n }, false);
        // All or nothing: every ledger holds exactly the accepted payments.
        const accepted = new Map<string, bigint>();
        rs.forEach((r, i) => {
          if (r.valid) accepted.set(ps[i]!.sba.authorization.budgetId, ps[i]!.amount);
        });
        const total = [...accepted.values()].reduce((a, b) => a + b, 0n);
        const g = offlineGrant.grantId;
        // The offline allowance of epoch 0: no bundle vouched here (a pinned key), so no refresh to count from.
        const ledgers = [
          await inner.total(`grant:${g}`),
          await inner.total(`offline-amount:${g}@0`),
          await inner.total(`offline-count:${g}@0`),
        ];
        if (ledgers[0] !== total || ledgers[1] !== total || ledgers[2] !== BigInt(accepted.size)) {
          throw new Error(`ledgers ${ledgers.join('/')} ≠ accepted ${total}/${total}/${accepted.size}`);
        }
      }),
      params(OFFLINE_RUNS),
    );
  },
);

test(
  'verifier offline: one SBA presented for 100 (over the offline allowance of 80) and ' +
    `for 10 at once: one of them is accepted (${REPLAY_RUNS} scheduled runs)`,
  async () => {
    // Sequentially either order accepts exactly one: 100 first is refused offline_limit_exceeded and
    // released, then 10 is accepted; 10 first is accepted, then 100 is a replay. PROTOCOL.md §7/§8:
    // a refused payment leaves nothing in any ledger, so it cannot make a later one a "replay".
    const sba = offlinePool[AMOUNTS.indexOf(100)]!;
    // The verifier lets presentations of one SBA take turns at the ledgers, so the order of the calls
    // decides who goes first; every storage step inside a turn is ordered by the scheduler.
    await fc.assert(
      fc.asyncProperty(scheduler(), fc.boolean(), async (s, bigFirst) => {
        const { storage } = scheduledStorage(s);
        const verify = createVerifier(c, ALL_FEATURES);
        const amounts = bigFirst ? ['100', '10'] : ['10', '100'];
        const rs = await s.waitFor(
          Promise.all(
            amounts.map((amount) => verify(sba, { ...baseOptions, amount, spendStorage: storage, offline: true })),
          ),
        );
        const codes = rs.map((r) => (r.valid ? 'ok' : r.error.code));
        if (codes.filter((x) => x === 'ok').length !== 1)
          throw new Error(`amounts ${amounts.join(', ')} → ${codes.join(', ')}: the SBA was never accepted`);
      }),
      params(REPLAY_RUNS),
    );
  },
);

void CtlError;
test.run();
