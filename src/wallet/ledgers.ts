/**
 * One payment often counts against several running totals at once: the grant's budget, the
 * offline allowance (PROTOCOL.md §8 `offline`), velocity and budget windows (§8, §13). All of them
 * are reserved in one atomic `reserveMany` of the SpendStorage, all or none (§13). A storage that
 * only has the single-counter `reserve` keeps the old way for ledgers that allow it (taken in
 * order, given back when a later one refuses) and refuses the ones that need the atomic reserve
 * (windows, holds), rather than half-enforce them.
 */
import { CtlError, type CtlErrorCode } from '../errors.js';
import type { PolicyGrant } from '../artifacts/types.js';
import { resetsAt, windowAt, windowsStartOf } from '../artifacts/windows.js';
import type { ReserveOptions, ReserveResult, SpendStorage } from './spend-storage.js';

export interface Ledger {
  key: string;
  amount: bigint;
  ceiling: bigint;
  /** The refusal when this ledger is full. */
  code: CtlErrorCode;
  what: string;
  /** For a window: when its ledger may be dropped (PROTOCOL.md §12). */
  endsAt?: number;
  /** For a budget window: when the next one starts, named by a `window_exceeded` refusal (PROTOCOL.md §13). */
  resetsAt?: string;
  /** Counts payments, not money: a capture leaves it as reserved (PROTOCOL.md §15). */
  count?: boolean;
  /** Only a storage with the atomic multi-counter reserve may hold it (PROTOCOL.md §13: windows, ancestors). */
  needsAtomic?: boolean;
}

export type ReserveAllResult = { ok: true } | { ok: false; result: Exclude<ReserveResult, 'reserved'>; ledger: Ledger };

export interface ReserveAllOptions extends ReserveOptions {
  /** The reservation is a hold, kept until captured (PROTOCOL.md §15). */
  hold?: boolean;
  /** For a hold on a merchant's ledger: given back if still uncaptured when `now` reaches it. */
  releaseAt?: number;
}

/**
 * One payment as its ledgers know it: `id` (the SBA's `budgetId`) within `scope` (the chain that
 * signed it, `chainScope`). The scope never changes with time, so the replay record of one SBA
 * is one record, whatever windows its ledgers cross (PROTOCOL.md §7).
 */
export interface PaymentRef {
  scope: string;
  id: string;
}

/**
 * The reservation's id in the storage: the payment's id within its scope. Another chain's SBA
 * carrying the same `budgetId` is then not a replay of this one, and cannot burn its id in advance.
 * @example reservationId({ scope: 'grant:g1', id: 'bud_1' }) // 'grant:g1|bud_1'
 */
export function reservationId(payment: PaymentRef): string {
  return `${payment.scope}|${payment.id}`;
}

/** Whether `storage` has the atomic multi-counter reserve (PROTOCOL.md §13). */
export function hasAtomicReserve(storage: SpendStorage): boolean {
  return (
    typeof storage.reserveMany === 'function' &&
    typeof storage.commitMany === 'function' &&
    typeof storage.releaseMany === 'function'
  );
}

/**
 * Reserves `id` in every ledger or in none; `options` say when the id may be forgotten (PROTOCOL.md
 * §12) and whether it is a hold (§15). Throws `unsupported_feature` when the storage lacks the
 * atomic reserve and a ledger or a hold needs it.
 */
export async function reserveAll(
  storage: SpendStorage,
  ledgers: readonly Ledger[],
  payment: PaymentRef,
  options?: ReserveAllOptions,
): Promise<ReserveAllResult> {
  if (ledgers.length === 0) return { ok: true };
  if (hasAtomicReserve(storage)) {
    const counters = ledgers.map((l) => ({
      key: l.key,
      amount: l.amount,
      ceiling: l.ceiling,
      ...(l.count ? { count: true } : {}),
      ...(l.endsAt !== undefined ? { ledgerExpiresAt: l.endsAt } : {}),
    }));
    const r = await storage.reserveMany!(reservationId(payment), counters, options);
    if (r.result === 'reserved') return { ok: true };
    if (r.result === 'duplicate') return { ok: false, result: 'duplicate', ledger: ledgers[0]! };
    const full = 'key' in r ? r.key : undefined;
    return { ok: false, result: 'exceeded', ledger: ledgers.find((l) => l.key === full) ?? ledgers[0]! };
  }
  const needs = options?.hold ? 'a hold (PROTOCOL.md §15)' : ledgers.find((l) => l.needsAtomic)?.what;
  if (needs !== undefined)
    throw new CtlError(
      'unsupported_feature',
      `this SpendStorage has no atomic multi-counter reserve (reserveMany), needed for ${needs}`,
    );
  // The single-counter calls scope the id by each ledger's key; a payment without a ledger that
  // needs the atomic reserve has the grant's own total among them, which never changes with time.
  const { id } = payment;
  const taken: Ledger[] = [];
  for (const ledger of ledgers) {
    const { expiresAt, now } = options ?? {};
    const o = { expiresAt, now, ...(ledger.endsAt === undefined ? {} : { ledgerExpiresAt: ledger.endsAt }) };
    const r = await storage.reserve(ledger.key, id, ledger.amount, ledger.ceiling, o);
    if (r !== 'reserved') {
      for (const t of taken) await storage.release(t.key, id);
      return { ok: false, result: r, ledger };
    }
    taken.push(ledger);
  }
  return { ok: true };
}

export async function commitAll(storage: SpendStorage, ledgers: readonly Ledger[], payment: PaymentRef): Promise<void> {
  if (ledgers.length === 0) return;
  if (hasAtomicReserve(storage)) await storage.commitMany!(reservationId(payment));
  else for (const l of ledgers) await storage.commit(l.key, payment.id);
}

export async function releaseAll(
  storage: SpendStorage,
  ledgers: readonly Ledger[],
  payment: PaymentRef,
): Promise<void> {
  if (ledgers.length === 0) return;
  if (hasAtomicReserve(storage)) await storage.releaseMany!(reservationId(payment));
  else for (const l of ledgers) await storage.release(l.key, payment.id);
}

const HOUR = 3_600_000;
const DAY = 86_400_000;
/** A window's ledger is dropped a day after the window ends: a clock stepped back less than that still finds it. */
const WINDOW_RETENTION_MS = DAY;

/**
 * The velocity windows of a grant (PROTOCOL.md §8): payments per hour and amount per merchant per
 * day, as fixed UTC windows (the hour and the day the payment falls in), each its own ledger.
 */
export function velocityLedgers(
  grant: PolicyGrant,
  amount: bigint,
  merchantId: string | undefined,
  now: number,
): Ledger[] {
  const v = grant.velocity;
  const out: Ledger[] = [];
  if (!v) return out;
  if (v.maxPaymentsPerHour !== undefined) {
    out.push({
      key: `velocity-hour:${grant.grantId}:${Math.floor(now / HOUR)}`,
      amount: 1n,
      ceiling: BigInt(v.maxPaymentsPerHour),
      code: 'velocity_exceeded',
      what: `${v.maxPaymentsPerHour} payments per hour`,
      endsAt: (Math.floor(now / HOUR) + 1) * HOUR + WINDOW_RETENTION_MS,
      count: true,
    });
  }
  if (v.maxAmountPerMerchantPerDay !== undefined) {
    out.push({
      key: `velocity-day:${grant.grantId}:${merchantId ?? '*'}:${Math.floor(now / DAY)}`,
      amount,
      ceiling: BigInt(v.maxAmountPerMerchantPerDay),
      code: 'velocity_exceeded',
      what: `${v.maxAmountPerMerchantPerDay} minor units of ${grant.currency} per merchant per day`,
      endsAt: (Math.floor(now / DAY) + 1) * DAY + WINDOW_RETENTION_MS,
    });
  }
  return out;
}

/**
 * The budget windows of a grant that a payment at `now` falls in (PROTOCOL.md §13): for each, its
 * amount and, with `maxPayments`, its count, each a ledger of its own, kept a day past the window.
 * @example reserveAll(storage, [...windowLedgers(grant, 1250n, Date.now())], budgetId)
 */
export function windowLedgers(grant: PolicyGrant, amount: bigint, now: number): Ledger[] {
  const out: Ledger[] = [];
  if (!grant.windows) return out;
  const start = windowsStartOf(grant, 'grant');
  for (const w of grant.windows) {
    const span = windowAt(w.every, start, now);
    const key = `${grant.grantId}:${w.every}:${span.index}`;
    const common = {
      code: 'window_exceeded' as const,
      needsAtomic: true,
      endsAt: span.endsAt + WINDOW_RETENTION_MS,
      resetsAt: resetsAt(span),
    };
    out.push({
      key: `window:${key}`,
      amount,
      ceiling: BigInt(w.maxAmountMinor),
      what: `${w.maxAmountMinor} minor units of ${grant.currency} per ${w.every} window`,
      ...common,
    });
    if (w.maxPayments !== undefined) {
      out.push({
        key: `window-count:${key}`,
        amount: 1n,
        ceiling: BigInt(w.maxPayments),
        what: `${w.maxPayments} payments per ${w.every} window`,
        ...common,
        count: true,
      });
    }
  }
  return out;
}

/**
 * A register that only rises, kept in a SpendStorage key: its total is its value. Raising it to
 * `value` reserves `value − total` under the ceiling `value`, atomically, so raisers racing never
 * push it past the larger of their values, and a lower value changes nothing. Returns the value
 * after (under contention that outlasts the retries, the last value read: never above the truth).
 * @example const epoch = await raiseRegister(storage, `offline-epoch:${grantId}`, BigInt(bundleIssuedAt), now)
 */
export async function raiseRegister(storage: SpendStorage, key: string, value: bigint, now: number): Promise<bigint> {
  let current = await storage.total(key);
  for (let i = 0; i < 16 && current < value; i++) {
    const id = `raise:${value}:${current}`;
    // The id need not be remembered: the ceiling alone makes the raise atomic.
    const r = await storage.reserve(key, id, value - current, value, { expiresAt: now, now });
    if (r === 'reserved') {
      await storage.commit(key, id);
      return value;
    }
    current = await storage.total(key); // another raise moved it meanwhile
  }
  return current;
}

/** Where a SpendStorage records the one role it serves (claimStorage). */
const STORAGE_ROLE_KEY = 'storage-role';
/** Storages this process has seen claimed, and by whom: the claim is for good, so one check will do. */
const claimed = new WeakMap<SpendStorage, 'wallet' | 'verifier'>();

/**
 * A SpendStorage serves one role, a wallet's or a verifier's. Each drops what has expired by its
 * own reading of time (PROTOCOL.md §12: a verifier's floor, a wallet's ledger clock), so on one
 * storage a wallet's later clock would forget a verifier's replay record while the verifier's
 * floor still holds the SBA valid: one SBA accepted twice. The first role to use a storage claims
 * it, atomically and for good; the other is refused (`unsupported_feature`). A device that pays
 * and takes payments gives each a storage of its own (`createKvSpendStorage(…, { prefix })`).
 * @example await claimStorage(storage, 'wallet')
 */
export async function claimStorage(storage: SpendStorage, role: 'wallet' | 'verifier'): Promise<void> {
  if (claimed.get(storage) === role) return;
  // The role is the reservation's id under a ceiling of one: a second role exceeds it.
  const r = await storage.reserve(STORAGE_ROLE_KEY, role, 1n, 1n);
  if (r === 'exceeded') {
    const other = role === 'wallet' ? 'verifier' : 'wallet';
    throw new CtlError(
      'unsupported_feature',
      `this SpendStorage already serves a ${other}: give the ${role} a storage of its own ` +
        `(e.g. createKvSpendStorage(storage, { prefix: '${role}/' }))`,
    );
  }
  if (r === 'reserved') await storage.commit(STORAGE_ROLE_KEY, role);
  claimed.set(storage, role);
}

/** Where a wallet's and a verifier's ledger keep their clock, apart: one storage may serve both. */
export const LEDGER_CLOCK_KEYS = { wallet: 'ledger-clock:wallet', verifier: 'ledger-clock:verifier' } as const;

/** A ledger clock is written when it has moved this far: at most one write a minute. */
const LEDGER_CLOCK_STEP_MS = 60_000;

/**
 * A ledger remembers the latest time it has used (PROTOCOL.md §12, §13), in a register of its own
 * storage: a window's ledger is dropped a day after the window ends, so a clock set back further
 * than that would find the window empty and open it again. Every time a payment is counted at is
 * max(clock, this register), and the register is raised to it before the storage is touched: a
 * refused payment or a capture drops ended ledgers as surely as an accepted one. It is written when
 * it has moved a minute, so it lags by a minute at most, well inside the day a window is kept. For
 * a wallet, which has no time floor, and a verifier whose host keeps none.
 * @example const now = await ledgerNow(storage, 'ledger-clock:wallet', Date.now())
 */
export async function ledgerNow(storage: SpendStorage, key: string, clock: number): Promise<number> {
  const floor = Number(await storage.total(key));
  const now = Math.max(clock, floor);
  if (now >= floor + LEDGER_CLOCK_STEP_MS) await raiseRegister(storage, key, BigInt(Math.floor(now)), now);
  return now;
}
