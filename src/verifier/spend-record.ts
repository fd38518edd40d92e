/**
 * What an accepted payment leaves behind, after every stateless check (PROTOCOL.md §7: a payment
 * refused for any other reason consumes nothing): the offline allowance's bundle age (§8), the
 * time floor raised (§12), and with `trackSpend` or offline, the payment reserved in every ledger
 * it counts in (§5 step 4's stateful part, §13, §14), a hold at its maximum (§15).
 */
import type { Delegation, PolicyGrant, SignedBudgetAuthorization } from '../artifacts/types.js';
import type { DelegationChain } from '../artifacts/delegation.js';
import type { VerifyCtlOptions } from './options.js';
import type { PresentedSba } from './presented-sba.js';
import type { VerifyTimes } from './grant-key.js';
import { chainScope } from '../artifacts/link-revocation.js';
import { CtlError, fail } from '../errors.js';
import { parseTimestamp } from '../values.js';
import { createMemorySpendStorage, type SpendStorage } from '../wallet/spend-storage.js';
import {
  commitAll,
  claimStorage,
  LEDGER_CLOCK_KEYS,
  ledgerNow,
  reservationId,
  raiseRegister,
  reserveAll,
  velocityLedgers,
  windowLedgers,
  type Ledger,
} from '../wallet/ledgers.js';
import { linkLedgers } from '../wallet/chain-ledgers.js';

/** The payment as the checks before found it. */
export interface AcceptedPayment {
  merchantId: string | undefined;
  /** The newest `issuedAt` of a live bundle that vouched for the grant's issuer (step 1). */
  bundleIssuedAt: number | undefined;
  /** The ids revocation asked about, root first (step 3): the leaf's names the replay scope. */
  ids: readonly { id: string }[];
  /** The host's clock reading, before the floor. */
  clock: number;
}

export interface SpendRecorder {
  /** Returns the hold's id for a hold accepted with spend tracked. Throws `CtlError` as the ledgers refuse. */
  record(p: PresentedSba, o: VerifyCtlOptions, t: VerifyTimes, pay: AcceptedPayment): Promise<string | undefined>;
  /** Where spend is tracked when the caller gives no `spendStorage`. */
  readonly defaultSpend: SpendStorage;
}

/** @example const holdId = await createSpendRecorder().record(p, options, times, payment) */
export function createSpendRecorder(): SpendRecorder {
  const defaultSpend = createMemorySpendStorage();
  const turns = new Map<string, Promise<unknown>>();

  /** Runs `fn` after every earlier call with the same key has settled. */
  async function oneAtATime<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = turns.get(key) ?? Promise.resolve();
    const run = prev.then(fn, fn);
    const tail = run.catch(() => undefined);
    turns.set(key, tail);
    try {
      return await run;
    } finally {
      if (turns.get(key) === tail) turns.delete(key);
    }
  }

  /**
   * PROTOCOL.md §5 step 4's stateful part, last of all: the payment (a hold at its maximum) is
   * reserved in every ledger it counts in, one atomic reservation keyed by the SBA's id within
   * its chain (`scope`), so it is accepted at most once, ever (§7). Returns the hold's id.
   */
  async function recordSpend(
    storage: SpendStorage,
    p: {
      o: VerifyCtlOptions;
      sba: SignedBudgetAuthorization<PolicyGrant | Delegation>;
      chain: DelegationChain;
      scope: string;
    },
    t: { amount: bigint; merchantId?: string; now: number; tol: number; bundleIssuedAt?: number },
  ): Promise<string | undefined> {
    const { o, chain } = p;
    await claimStorage(storage, 'verifier'); // one role per storage (claimStorage says why)
    const a = p.sba.authorization;
    const grant = chain.root;
    const sbaExpiry = parseTimestamp(a.expiresAt, 'authorization.expiresAt');
    // A ledger remembers the latest time it counted at (PROTOCOL.md §12, §13): without a host
    // floor, the storage's own, so a clock set back reopens no window this ledger saw close.
    const at = o.timeFloor ? t.now : await ledgerNow(storage, LEDGER_CLOCK_KEY, t.now);
    // A time the ledger has counted is a time the verifier has seen: an SBA expired by it is
    // refused, though the clock was set back (its id may be forgotten by then).
    if (at >= sbaExpiry + t.tol) fail('sba_expired', 'the SBA has expired (by the time this ledger has counted)');
    const offlineAllowance = o.offline ? grant.offline : undefined;
    // The offline allowance is counted per refresh (PROTOCOL.md §8: "before it must go online"):
    // the newest bundle that vouched for the issuer, held in a register that only rises, so an
    // older bundle, or none, never reopens a count already spent.
    const epoch =
      offlineAllowance && (offlineAllowance.maxPayments !== undefined || offlineAllowance.maxAmountMinor !== undefined)
        ? await raiseRegister(storage, `offline-epoch:${grant.grantId}`, BigInt(Math.floor(t.bundleIssuedAt ?? 0)), at)
        : 0n;
    // A hold is counted at its maximum until captured (PROTOCOL.md §15).
    const hold = a.capture === 'hold';
    const held = hold ? BigInt(a.maxAmountMinor) : t.amount;
    // Under a chain, every link too, leaf to root, in the one reservation (PROTOCOL.md §13, §14).
    const ledgers = [
      ...linkLedgers(chain, 'grant:', held, at).reverse(),
      ...spendLedgers(grant, held, t.merchantId, at, offlineAllowance, epoch),
    ];
    const payment = { scope: p.scope, id: a.budgetId };
    // The id may be forgotten once the SBA is refused as expired whatever the clock says: at its
    // expiry under a time floor, a day later without one (a clock stepped back less than that
    // cannot revive it). A hold goes back at the SBA's own expiry, uncaptured, never in the
    // clock tolerance: the capture must come before it (PROTOCOL.md §15).
    const options = {
      expiresAt: sbaExpiry + t.tol + (o.timeFloor ? 0 : UNFLOORED_ID_RETENTION_MS),
      now: at,
      ...(hold ? { hold, releaseAt: sbaExpiry } : {}),
    };
    // Presentations of one SBA take turns here: while one holds a reservation that may still
    // be given back, another must not read it as an accepted payment (`replay`).
    const r = await oneAtATime(reservationId(payment), async () => {
      const res = await reserveAll(storage, ledgers, payment, options);
      if (res.ok && !hold) await commitAll(storage, ledgers, payment);
      return res;
    });
    if (!r.ok) {
      if (r.result === 'duplicate') fail('replay', `budgetId ${a.budgetId} was already accepted`);
      throw new CtlError(r.ledger.code, `this payment would exceed ${r.ledger.what}`, { resetsAt: r.ledger.resetsAt });
    }
    return hold ? reservationId(payment) : undefined;
  }

  async function record(
    p: PresentedSba,
    o: VerifyCtlOptions,
    t: VerifyTimes,
    pay: AcceptedPayment,
  ): Promise<string | undefined> {
    const { bundleIssuedAt } = pay;
    const offlineAllowance = o.offline ? p.chain.root.offline : undefined;
    if (offlineAllowance?.maxBundleAgeMs !== undefined) {
      // Without a bundle (a key from signingKeyPem or trustedHumans) nothing vouched at all.
      if (bundleIssuedAt === undefined)
        fail(
          'offline_limit_exceeded',
          'this grant limits the age of the trust bundle offline, and no trust bundle vouched for it',
        );
      if (t.now - bundleIssuedAt > offlineAllowance.maxBundleAgeMs)
        fail('offline_limit_exceeded', 'the trust bundle is older than this grant allows offline');
    }
    // Every stateless check passed: record the time this payment proves (PROTOCOL.md §12), only
    // what the verifier trusts (its clock, its root's bundles), before any ledger forgets an id by it.
    if (o.timeFloor) await o.timeFloor.raise(Math.max(pay.clock, bundleIssuedAt ?? 0));
    if (!o.trackSpend && !o.offline) return undefined;
    const storage = o.spendStorage ?? defaultSpend;
    const leaf = pay.ids.length > 1 ? pay.ids[pay.ids.length - 1]!.id : undefined;
    return recordSpend(
      storage,
      { o, sba: p.sba, chain: p.chain, scope: chainScope(p.chain, 'grant:', leaf) },
      { amount: p.amount, merchantId: pay.merchantId, now: t.now, tol: t.tol, bundleIssuedAt },
    );
  }

  return { record, defaultSpend };
}

const UNFLOORED_ID_RETENTION_MS = 86_400_000;
/** Where a verifier without a host time floor keeps the latest time its ledger has counted at. */
const LEDGER_CLOCK_KEY = LEDGER_CLOCK_KEYS.verifier;

/**
 * The ledgers a payment the merchant accepts counts against: the grant's cumulative budget
 * (`trackSpend`), its velocity windows (recorded whenever spend is), and the offline allowance.
 */
function spendLedgers(
  grant: PolicyGrant,
  amount: bigint,
  merchantId: string | undefined,
  now: number,
  offline: PolicyGrant['offline'],
  epoch: bigint,
): Ledger[] {
  const ledgers: Ledger[] = [
    {
      key: `grant:${grant.grantId}`,
      amount,
      ceiling: BigInt(grant.maxAmountMinor),
      code: 'budget_exceeded',
      what: 'the grant budget',
    },
    ...velocityLedgers(grant, amount, merchantId, now),
    ...windowLedgers(grant, amount, now),
  ];
  // The offline allowance bounds what is accepted until the terminal next refreshes: one count per
  // refresh epoch (the issuedAt of the newest bundle that vouched), so a later bundle restores it.
  const key = `${grant.grantId}@${epoch}`;
  if (offline?.maxPayments !== undefined) {
    ledgers.push({
      key: `offline-count:${key}`,
      amount: 1n,
      count: true,
      ceiling: BigInt(offline.maxPayments),
      code: 'offline_limit_exceeded',
      what: 'the offline payment count',
    });
  }
  if (offline?.maxAmountMinor !== undefined) {
    ledgers.push({
      key: `offline-amount:${key}`,
      amount,
      ceiling: BigInt(offline.maxAmountMinor),
      code: 'offline_limit_exceeded',
      what: 'the offline amount',
    });
  }
  return ledgers;
}
