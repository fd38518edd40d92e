/**
 * The wallet (spec §2.8): signs one SBA per payment under a PolicyGrant, never past the ceiling.
 * Order per payment: local policy checks → revocation (spec §3 rule 1: checked before each SBA is
 * signed; online at the grant's `revocationUrl`, or offline from installed Trust Bundles) → atomic
 * reserve of the session's ceiling and the grant's total → sign → commit. A failed signature
 * releases the reservation.
 */
import type { CtlCrypto, PrivateKeyInput, SigningKey } from '../crypto/types.js';
import type { BudgetScope, Delegation, PolicyGrant, SignedBudgetAuthorization } from '../artifacts/types.js';
import {
  chainOf,
  checkGrantOrDelegation,
  createDelegationWith,
  effectiveGrant,
  type DelegationFields,
} from '../artifacts/delegation.js';
import { linkLedgers } from './chain-ledgers.js';
import { chainIds, chainScope, linkRevocationUrl } from '../artifacts/link-revocation.js';
import { DEFAULT_SBA_TTL_MS, prepareSbaSigning, signPreparedSba, type PreparedSbaSigning } from '../artifacts/sba.js';
import { frozenJsonCopy } from '../encoding/frozen-copy.js';
import { CtlBudgetExceededError, CtlError, CtlGrantRevokedError } from '../errors.js';
import { parseStrictJson } from '../encoding/jcs.js';
import {
  formatTimestamp,
  isIdentifier,
  parseAmount,
  parseCurrency,
  parsePaymentAmount,
  parseTimestamp,
  purposeAllowed,
  readClock,
  timeOption,
} from '../values.js';
import { hostFetch, hostNow } from '../host.js';
import { newId } from '../ids.js';
import { createMemorySpendStorage, type SpendStorage } from './spend-storage.js';
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
import { bundleRevocation, type BundleRevocationOptions } from './bundle-revocation.js';

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
  const given = (typeof grantInput === 'string' ? parseStrictJson(grantInput) : grantInput) as G;
  checkGrantOrDelegation(given, 'grant');
  // The session's own frozen copy: every SBA embeds it and signs its canonical text, taken once.
  const drawn = frozenJsonCopy(given);
  // Under a delegation, what the leaf allows as one grant; the chain's links are charged too (PROTOCOL.md §14).
  const grant = effectiveGrant(drawn);
  const chain = chainOf(drawn);
  const root = chain.root;
  if (!options || typeof options !== 'object') throw new TypeError('createSession: options are required');
  if (typeof options.actorId !== 'string' || options.actorId.length === 0)
    throw new TypeError('createSession: options.actorId is required');
  if (!options.signingKey) throw new TypeError('createSession: options.signingKey is required');
  const sessionId = options.sessionId ?? newId('sess_');
  if (!isIdentifier(sessionId)) throw new TypeError('createSession: options.sessionId must be an identifier');
  const grantMax = BigInt(grant.maxAmountMinor);
  let ceiling = grantMax;
  if (options.ceiling) {
    ceiling = parseAmount(options.ceiling.amount, 'ceiling.amount');
    if (parseCurrency(options.ceiling.currency, 'ceiling.currency') !== grant.currency) {
      throw new CtlError(
        'currency_mismatch',
        `createSession: ceiling currency ${options.ceiling.currency} differs from the grant's ${grant.currency}`,
      );
    }
    if (ceiling > grantMax) throw new RangeError('createSession: ceiling exceeds the grant maxAmountMinor');
  }
  const storage = options.spendStorage ?? createMemorySpendStorage();
  // The grant's total is shared by every session of the grant on this storage (PROTOCOL.md §12);
  // the session's total bounds it by its own ceiling.
  const grantKey = `wallet:${root.grantId}`;
  const sessionKey = `${grant.grantId}/${sessionId}`;
  const now = options.now ?? hostNow;
  const fetchFn = options.fetch ?? (hostFetch() as FetchLike | undefined);
  // Time is a number or nothing (PROTOCOL.md §12): each time option checked once, here.
  const ttl = timeOption(options.revocationTtl, 'options.revocationTtl', 30_000);
  const revocationTimeoutMs = timeOption(options.revocationTimeoutMs, 'options.revocationTimeoutMs', 3000);
  const sbaTtlMs = timeOption(options.sbaTtlMs, 'options.sbaTtlMs', DEFAULT_SBA_TTL_MS);
  const grantExpiry = parseTimestamp(grant.expiresAt, 'grant.expiresAt');
  const fromBundles = options.revocationFromBundles && bundleRevocation(c, options.revocationFromBundles);
  let revoked = false;
  let prepared: Promise<PreparedSbaSigning> | undefined;
  // An SBA's id within the chain it is signed under (PROTOCOL.md §7): the grant's, never the
  // session's, so a session opened after a restart settles the holds of the one before.
  const scope = chainScope(chain, 'wallet:');

  /** The time this wallet counts at, on a storage that serves it alone (claimStorage, ledgerNow). */
  async function walletTime(): Promise<number> {
    await claimStorage(storage, 'wallet');
    return ledgerNow(storage, LEDGER_CLOCK_KEY, readClock(now, 'options.now'));
  }

  async function createSba(p: PaymentRequest): Promise<SignedBudgetAuthorization<G>> {
    if (revoked) throw new CtlGrantRevokedError();
    if (!p || typeof p !== 'object') throw new TypeError('createSba: payment must be an object');
    const amount = parsePaymentAmount(p.amount, 'amount');
    if (p.hold !== undefined && typeof p.hold !== 'boolean') throw new TypeError('createSba: hold must be a boolean');
    if (parseCurrency(p.currency, 'currency') !== grant.currency) {
      throw new CtlError('currency_mismatch', `the grant is in ${grant.currency}, not ${p.currency}`);
    }
    if (typeof p.rail !== 'string' || !grant.allowedRails.includes(p.rail)) {
      throw new CtlError('rail_not_allowed', `rail "${String(p.rail)}" is not allowed by the grant`);
    }
    if (
      p.merchantId !== undefined &&
      grant.destinationAllowlist &&
      !grant.destinationAllowlist.includes(p.merchantId)
    ) {
      throw new CtlError(
        'destination_not_allowed',
        `merchant "${p.merchantId}" is not in the grant's destination allowlist`,
      );
    }
    if (p.purpose !== undefined && grant.allowedPurposes && !purposeAllowed(p.purpose, grant.allowedPurposes)) {
      throw new CtlError('purpose_not_allowed', `purpose "${p.purpose}" is not allowed by the grant`);
    }
    // Every time is max(clock, the latest time this storage counted at): a clock set back reopens
    // no window (PROTOCOL.md §12, §13); the SBA is signed at that time too.
    const t = await walletTime();
    if (t >= grantExpiry) throw new CtlError('grant_expired', `the grant expired at ${grant.expiresAt}`);
    // Every id of a chain, root first: a revoked link revokes what hangs below it (PROTOCOL.md §14).
    for (const { id } of chainIds(chain)) {
      const status = fromBundles
        ? await fromBundles(id, t)
        : await sharedRevocation.check(id === root.grantId ? root.revocationUrl : linkRevocationUrl(root, id), id, {
            ttlMs: ttl,
            now: t,
            fetch: fetchFn,
            timeoutMs: revocationTimeoutMs,
          });
      if (status.revoked) {
        revoked = true; // terminal (spec §7): no further attempt reaches the network
        throw new CtlGrantRevokedError();
      }
    }
    const budgetId = newId('bud_');
    // The session ceiling, the grant's total, its velocity and its budget windows at the SBA's
    // issuedAt (PROTOCOL.md §8, §12, §13), all or nothing.
    const ledgers: Ledger[] = [
      {
        key: sessionKey,
        amount,
        ceiling,
        code: 'budget_exceeded',
        what: `the session ceiling of ${ceiling} minor units`,
      },
      // Each link of a chain, leaf to root, then the root grant (PROTOCOL.md §14).
      ...linkLedgers(chain, 'wallet:', amount, t).reverse(),
      {
        key: grantKey,
        amount,
        ceiling: BigInt(root.maxAmountMinor),
        code: 'budget_exceeded',
        what: `the grant's ${root.maxAmountMinor} minor units`,
      },
      ...velocityLedgers(root, amount, p.merchantId, t),
      ...windowLedgers(root, amount, t),
    ];
    // The wallet needs the id only until commit; it may forget it once the SBA has expired. A
    // hold it keeps, whole, until it learns the capture: the merchant may have captured all of it,
    // and releasing an unknown outcome would let it pay past its grant (PROTOCOL.md §15).
    const sbaExpiry = Math.min(t + sbaTtlMs, grantExpiry);
    const hold = p.hold === true;
    const payment = { scope, id: budgetId };
    const r = await reserveAll(storage, ledgers, payment, { expiresAt: sbaExpiry, now: t, hold });
    if (!r.ok) {
      if (r.ledger.code === 'budget_exceeded')
        throw new CtlBudgetExceededError(`${p.amount} minor units of ${p.currency} would exceed ${r.ledger.what}`);
      throw new CtlError(r.ledger.code, `this payment would exceed ${r.ledger.what}`, { resetsAt: r.ledger.resetsAt });
    }
    try {
      const ready = await (prepared ??= prepareSbaSigning(c, drawn, {
        signingKey: options.signingKey,
        keyId: options.signingKeyId,
      }).catch((e) => {
        prepared = undefined; // a key that failed to import is not kept as the answer
        throw e;
      }));
      const sba = await signPreparedSba<G>(
        c,
        ready,
        {
          sessionId,
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
    sessionId,
    grant: drawn,
    createSba,
    delegate: (fields) => createDelegationWith(c, drawn, fields, { signingKey: options.signingKey, now }),
    async remaining() {
      await claimStorage(storage, 'wallet'); // what it reads is this wallet's only on its own storage
      let left = ceiling - (await storage.total(sessionKey));
      const bounds = [{ key: grantKey, ceiling: BigInt(root.maxAmountMinor) }, ...linkLedgers(chain, 'wallet:', 0n, 0)];
      for (const b of bounds) {
        if (!b.key.startsWith('wallet:')) continue; // a link's windows
        const l = b.ceiling - (await storage.total(b.key));
        if (l < left) left = l;
      }
      const remainingMinor = (left > 0n ? left : 0n).toString();
      if (!root.windows) return { remainingMinor };
      const t = await walletTime();
      return { remainingMinor, windows: await windowsRemaining(storage, root, t) };
    },
    async capture(budgetId, amount) {
      if (!isIdentifier(budgetId)) throw new CtlError('malformed', 'capture: budgetId must be an identifier');
      const t = await walletTime();
      // No deadline here: the wallet learns a capture whenever it learns it (PROTOCOL.md §15).
      await captureHold(storage, reservationId({ scope, id: budgetId }), amount, t);
    },
  };
}
