/**
 * The wallet (spec §2.8): signs one SBA per payment under a PolicyGrant, never past the ceiling.
 * Order per payment: local policy checks → revocation (spec §3 rule 1: checked before each SBA is
 * signed; online at the grant's `revocationUrl`, or offline from installed Trust Bundles) → atomic
 * reserve of the session's ceiling and the grant's total → sign → commit. A failed signature
 * releases the reservation.
 */
import type { CtlCrypto, PrivateKeyInput, SigningKey } from '../crypto/types.js';
import type { BudgetScope, Delegation, PolicyGrant, SignedBudgetAuthorization } from '../artifacts/types.js';
import { createDelegationWith, type DelegationFields } from '../artifacts/delegation.js';
import { linkLedgers } from './chain-ledgers.js';
import { chainIds, linkRevocationUrl } from '../artifacts/link-revocation.js';
import { prepareSbaSigning, signPreparedSba, type PreparedSbaSigning } from '../artifacts/sba.js';
import { CtlBudgetExceededError, CtlError, CtlGrantRevokedError } from '../errors.js';
import { formatTimestamp, isIdentifier, readClock } from '../values.js';
import { newId } from '../ids.js';
import type { SpendStorage } from './spend-storage.js';
import {
  commitAll,
  LEDGER_CLOCK_KEYS,
  claimStorage,
  ledgerNow,
  releaseAll,
  reservationId,
  reserveAll,
  velocityLedgers,
  windowLedgers,
  type Ledger,
} from './ledgers.js';
import { captureHold, windowsRemaining, type WindowRemaining } from './holds.js';
import { createRevocationChecker, type RevocationChecker } from '../revocation.js';
import type { FetchLike } from '../net/fetch-json.js';
import type { BundleRevocationOptions } from './bundle-revocation.js';
import { sessionSettings, type SessionSettings } from './session-settings.js';
import { checkPaymentPolicy } from './payment-policy.js';

/** Where a wallet's storage keeps the latest time it has counted a payment at (PROTOCOL.md §12, §13). */
const LEDGER_CLOCK_KEY = LEDGER_CLOCK_KEYS.wallet;

export interface SessionOptions {
  /** Agent or wallet identity, copied into every SBA. */
  actorId: string;
  /** The private half of `grant.actorKey`: PEM, JWK, raw bytes or a CryptoKey. */
  signingKey: PrivateKeyInput | SigningKey;
  signingKeyId?: string;
  scope?: BudgetScope;
  /**
   * The session's own ceiling, a second bound inside the grant's: at most the grant's
   * `maxAmountMinor`, same currency. Every session of one grant on one `spendStorage` also draws
   * on the grant's total (PROTOCOL.md §12), whatever its ceiling.
   */
  ceiling?: { amount: string; currency: string };
  /** Milliseconds a revocation answer is cached (default 30 000). */
  revocationTtl?: number;
  /** Timeout of one revocation request (default 3000 ms). */
  revocationTimeoutMs?: number;
  issuer?: string;
  /** Stable id to resume a persisted session (and its `ceiling`'s total); generated when absent. */
  sessionId?: string;
  /**
   * Where spend is kept; in memory by default (spec §2.8). The grant's running total lives here
   * keyed by the grant id, so sessions sharing it (and restarts over a persisted one) share the grant.
   */
  spendStorage?: SpendStorage;
  /**
   * Offline mode: revocation from installed Trust Bundles, verified against the pinned root, in
   * place of the grant's `revocationUrl`: no request is made, `fetch` and `revocationTtl` are not
   * used, the bundles are read at each payment. Without a live bundle, fail closed.
   */
  revocationFromBundles?: BundleRevocationOptions;
  fetch?: FetchLike;
  now?: () => number;
  /** Lifetime of each SBA in ms (default 5 minutes, never past the grant). */
  sbaTtlMs?: number;
}

export interface PaymentRequest {
  amount: string;
  currency: string;
  rail: string;
  merchantId?: string;
  purpose?: string;
  /**
   * Sign a hold (PROTOCOL.md §15): `amount` is the most the merchant may capture. It stays
   * reserved in the `spendStorage`, whole, also past the SBA's expiry and across restarts, until
   * `capture` settles it with what the merchant signed it captured (0: a void).
   */
  hold?: boolean;
}

export interface WalletSession<G extends PolicyGrant | Delegation = PolicyGrant> {
  readonly sessionId: string;
  /** The grant, or the delegation (a chain's leaf) the session draws on (PROTOCOL.md §14). */
  readonly grant: G;
  /** Signs the SBA for one payment, or throws `CtlBudgetExceededError` / `CtlGrantRevokedError` / `CtlError`. */
  createSba(payment: PaymentRequest): Promise<SignedBudgetAuthorization<G>>;
  /**
   * Hands another key part of this session's grant (PROTOCOL.md §14): a `ctl-delegation/1` signed
   * with this session's key, narrowing `grant`; the sub-agent opens its own session with it.
   * @example const d = await session.delegate({ actorKey: subAgentPublicJwk, maxAmountMinor: '2000', expiresAt })
   */
  delegate(fields: DelegationFields): Promise<Delegation>;
  /**
   * What this session may still sign: the lower of its ceiling's and the grant's remaining totals,
   * and each of the root grant's budget windows: remaining amount and reset time (PROTOCOL.md §13).
   */
  remaining(): Promise<{ remainingMinor: string; windows?: WindowRemaining[] }>;
  /**
   * Settles a hold signed under this session's grant (by this session or an earlier one on the same
   * `spendStorage`: a restart changes nothing) with what the merchant captured, as a receipt it
   * signed says (verify it first: `verifyReceipt`); "0" is a void. The rest goes back to every
   * counter. Until then the whole hold stays counted, also past the SBA's expiry (PROTOCOL.md §15).
   * Throws `capture_exceeds_hold` (the hold stays), `replay` (settled already), `hold_expired` (no
   * such hold on this storage), `malformed` (not an identifier).
   */
  capture(budgetId: string, amount: string): Promise<void>;
}

/** One checker per process: wallets of one grant share its cached answer. */
const sharedRevocation: RevocationChecker = createRevocationChecker();

export function createSessionWith<G extends PolicyGrant | Delegation = PolicyGrant>(
  c: CtlCrypto,
  grantInput: G | string,
  options: SessionOptions,
): WalletSession<G> {
  const s = sessionSettings(c, grantInput, options);
  const { drawn, grant, storage, grantExpiry } = s;
  let revoked = false;
  const signing = lazySigning(c, drawn, options);

  /** The time this wallet counts at, on a storage that serves it alone (claimStorage, ledgerNow). */
  async function walletTime(): Promise<number> {
    await claimStorage(storage, 'wallet');
    return ledgerNow(storage, LEDGER_CLOCK_KEY, readClock(s.now, 'options.now'));
  }

  async function createSba(p: PaymentRequest): Promise<SignedBudgetAuthorization<G>> {
    if (revoked) throw new CtlGrantRevokedError();
    const amount = checkPaymentPolicy(grant, p);
    // Every time is max(clock, the latest time this storage counted at): a clock set back reopens
    // no window (PROTOCOL.md §12, §13); the SBA is signed at that time too.
    const t = await walletTime();
    if (t >= grantExpiry) throw new CtlError('grant_expired', `the grant expired at ${grant.expiresAt}`);
    await checkChainRevocation(s, t, () => {
      revoked = true; // terminal (spec §7): no further attempt reaches the network
    });
    const budgetId = newId('bud_');
    const ledgers = paymentLedgers(s, amount, p.merchantId, t);
    // The wallet needs the id only until commit; it may forget it once the SBA has expired. A
    // hold it keeps, whole, until it learns the capture: the merchant may have captured all of it,
    // and releasing an unknown outcome would let it pay past its grant (PROTOCOL.md §15).
    const sbaExpiry = Math.min(t + s.sbaTtlMs, grantExpiry);
    const hold = p.hold === true;
    const payment = { scope: s.scope, id: budgetId };
    const r = await reserveAll(storage, ledgers, payment, { expiresAt: sbaExpiry, now: t, hold });
    if (!r.ok) throw refusal(r.ledger, p);
    try {
      const sba = await signPreparedSba<G>(
        c,
        await signing(),
        {
          sessionId: s.sessionId,
          actorId: options.actorId,
          maxAmountMinor: p.amount,
          budgetScope: options.scope ?? 'SESSION',
          budgetId,
          rail: p.rail,
          merchantId: p.merchantId,
          purpose: p.purpose,
          issuer: options.issuer,
          expiresAt: formatTimestamp(sbaExpiry),
          hold,
        },
        t,
      );
      // A hold stays reserved, in the storage, until its capture (PROTOCOL.md §15).
      if (!hold) await commitAll(storage, ledgers, payment);
      return sba;
    } catch (e) {
      await releaseAll(storage, ledgers, payment); // never signed: provably not paid
      throw e;
    }
  }

  return {
    sessionId: s.sessionId,
    grant: drawn,
    createSba,
    delegate: (fields) => createDelegationWith(c, drawn, fields, { signingKey: options.signingKey, now: s.now }),
    async remaining() {
      await claimStorage(storage, 'wallet'); // what it reads is this wallet's only on its own storage
      const remainingMinor = await remainingTotal(s);
      if (!s.root.windows) return { remainingMinor };
      const t = await walletTime();
      return { remainingMinor, windows: await windowsRemaining(storage, s.root, t) };
    },
    async capture(budgetId, amount) {
      if (!isIdentifier(budgetId)) throw new CtlError('malformed', 'capture: budgetId must be an identifier');
      const t = await walletTime();
      // No deadline here: the wallet learns a capture whenever it learns it (PROTOCOL.md §15).
      await captureHold(storage, reservationId({ scope: s.scope, id: budgetId }), amount, t);
    },
  };
}

/**
 * The signing key, imported at the first payment and kept; a key that failed to import is not
 * kept as the answer, so the next payment tries again.
 */
function lazySigning(
  c: CtlCrypto,
  drawn: PolicyGrant | Delegation,
  options: SessionOptions,
): () => Promise<PreparedSbaSigning> {
  let prepared: Promise<PreparedSbaSigning> | undefined;
  return () =>
    (prepared ??= prepareSbaSigning(c, drawn, {
      signingKey: options.signingKey,
      keyId: options.signingKeyId,
    }).catch((e) => {
      prepared = undefined;
      throw e;
    }));
}

/**
 * Revocation is checked before each SBA is signed (spec §3 rule 1), for every id of the chain,
 * root first: a revoked link revokes what hangs below it (PROTOCOL.md §14). Online at the grant's
 * `revocationUrl`, or offline from installed Trust Bundles. Throws `CtlGrantRevokedError` after
 * `markRevoked`.
 */
async function checkChainRevocation(
  s: SessionSettings<PolicyGrant | Delegation>,
  t: number,
  markRevoked: () => void,
): Promise<void> {
  const { root, fromBundles } = s;
  for (const { id } of chainIds(s.chain)) {
    const status = fromBundles
      ? await fromBundles(id, t)
      : await sharedRevocation.check(id === root.grantId ? root.revocationUrl : linkRevocationUrl(root, id), id, {
          ttlMs: s.ttl,
          now: t,
          fetch: s.fetchFn,
          timeoutMs: s.revocationTimeoutMs,
        });
    if (status.revoked) {
      markRevoked();
      throw new CtlGrantRevokedError();
    }
  }
}

/**
 * Every running total one payment counts against, reserved all or nothing: the session ceiling,
 * the grant's total, its velocity and its budget windows at the SBA's issuedAt (PROTOCOL.md §8,
 * §12, §13).
 */
function paymentLedgers(
  s: SessionSettings<PolicyGrant | Delegation>,
  amount: bigint,
  merchantId: string | undefined,
  t: number,
): Ledger[] {
  const { root, ceiling } = s;
  return [
    {
      key: s.sessionKey,
      amount,
      ceiling,
      code: 'budget_exceeded',
      what: `the session ceiling of ${ceiling} minor units`,
    },
    // Each link of a chain, leaf to root, then the root grant (PROTOCOL.md §14).
    ...linkLedgers(s.chain, 'wallet:', amount, t).reverse(),
    {
      key: s.grantKey,
      amount,
      ceiling: BigInt(root.maxAmountMinor),
      code: 'budget_exceeded',
      what: `the grant's ${root.maxAmountMinor} minor units`,
    },
    ...velocityLedgers(root, amount, merchantId, t),
    ...windowLedgers(root, amount, t),
  ];
}

/** The error for a payment a full ledger refused: a window's names when it resets (PROTOCOL.md §13). */
function refusal(ledger: Ledger, p: PaymentRequest): Error {
  if (ledger.code === 'budget_exceeded')
    return new CtlBudgetExceededError(`${p.amount} minor units of ${p.currency} would exceed ${ledger.what}`);
  return new CtlError(ledger.code, `this payment would exceed ${ledger.what}`, { resetsAt: ledger.resetsAt });
}

/** The lower of the session ceiling's and the grant's (and each link's) remaining totals, never below 0. */
async function remainingTotal(s: SessionSettings<PolicyGrant | Delegation>): Promise<string> {
  const { storage } = s;
  let left = s.ceiling - (await storage.total(s.sessionKey));
  const bounds = [
    { key: s.grantKey, ceiling: BigInt(s.root.maxAmountMinor) },
    ...linkLedgers(s.chain, 'wallet:', 0n, 0),
  ];
  for (const b of bounds) {
    if (!b.key.startsWith('wallet:')) continue; // a link's windows
    const l = b.ceiling - (await storage.total(b.key));
    if (l < left) left = l;
  }
  return (left > 0n ? left : 0n).toString();
}
