/**
 * An executable model of the SDK's spend state machine, written from ../shared/design/PROTOCOL.md
 * (§1, §4, §5, §7, §12–§16) and not from the code. Plain data and small functions: the harness
 * (spend-harness.ts) asks it what a wallet or a merchant must answer, then compares.
 *
 * What it keeps: the links of one delegation tree (the root grant and its delegations, each with
 * its ceiling, windows and times, revoked or not), one ledger per SpendStorage (a wallet per key
 * holder, one merchant), the host clock and the merchant's time floor.
 *
 * Decisions where PROTOCOL.md leaves a choice (each is listed in test/model/README.md):
 * - a refusal for which two counters are full at once (a lifetime and a window, two links) may
 *   carry either code: `codes` is the set of acceptable ones (§13 names no order);
 * - whether a hold that moved nothing (voided, or released at its expiry) still counts as one of a
 *   window's `maxPayments` is not said (§13: "a release returns the amount"): either answer passes,
 *   and the bound is checked on the payments that moved something;
 * - replay records are scoped to the chain that signed them (issue item 7): the leaf link;
 * - a wallet's time is max(clock, the latest time its ledger counted at): it has no host-kept
 *   floor (§12 gives one to offline verifiers), but its ledger keeps a clock set back from
 *   reopening a window (issue 33 item 6), and it signs at that time.
 */

export type Every = 'PT1H' | 'P1D' | 'P7D' | 'P1M' | 'P1Y';
export const EVERIES: readonly Every[] = ['PT1H', 'P1D', 'P7D', 'P1M', 'P1Y'];

export interface WindowRule {
  every: Every;
  max: bigint;
  maxPayments?: number;
}

/** The root grant (no parent) or a delegation (§14). `key` is the model's identity of the link. */
export interface Link {
  key: string;
  id: string;
  parent?: string;
  max: bigint;
  issuedAt: number;
  expiresAt: number;
  windows: WindowRule[];
  windowsStart: number;
  revoked: boolean;
  depth: number;
}

/** One SBA as a ledger counts it. */
export interface Entry {
  scope: string;
  budgetId: string;
  chain: string[];
  amount: bigint;
  at: number;
  expiresAt: number;
  hold: boolean;
  captured?: bigint;
}

/** A SpendStorage: a wallet's (holds stay counted until a capture is learned) or a merchant's. */
export interface Ledger {
  entries: Entry[];
  releasesHoldsAtExpiry: boolean;
}

/**
 * The model's answer. `codes`: every code the document allows here (one, unless it names no
 * order). `tolerate`: refusals the document allows instead of an acceptance.
 */
export type Verdict = { ok: true; tolerate?: string[] } | { ok: false; codes: string[]; resetsAt?: number[] };

const FIXED: Record<string, number> = { PT1H: 3_600_000, P1D: 86_400_000, P7D: 7 * 86_400_000 };

/** Start of window k (§13): fixed steps, or calendar months/years in UTC, clamped to the month's last day. */
export function windowStart(every: Every, start: number, k: number): number {
  const fixed = FIXED[every];
  if (fixed !== undefined) return start + k * fixed;
  const d = new Date(start);
  const month = d.getUTCMonth() + (every === 'P1M' ? k : 12 * k);
  const year = d.getUTCFullYear() + Math.floor(month / 12);
  const m = ((month % 12) + 12) % 12;
  const lastDay = new Date(Date.UTC(year, m + 1, 0)).getUTCDate();
  const day = Math.min(d.getUTCDate(), lastDay);
  return Date.UTC(year, m, day, d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds(), d.getUTCMilliseconds());
}

/** The k whose window [start_k, start_k+1) holds t. */
export function windowIndex(every: Every, start: number, t: number): number {
  const fixed = FIXED[every];
  if (fixed !== undefined) return Math.floor((t - start) / fixed);
  const a = new Date(start);
  const b = new Date(t);
  const months = (b.getUTCFullYear() - a.getUTCFullYear()) * 12 + b.getUTCMonth() - a.getUTCMonth();
  let k = every === 'P1M' ? months : Math.floor(months / 12);
  while (windowStart(every, start, k) > t) k--;
  while (windowStart(every, start, k + 1) <= t) k++;
  return k;
}

export class SpendModel {
  links = new Map<string, Link>();
  wallets = new Map<string, Ledger>();
  merchant: Ledger = { entries: [], releasesHoldsAtExpiry: true };
  clock: number;
  /**
   * The merchant's persisted time floor (§12), as its store holds it: every time check uses
   * max(clock, floor). Which readings it keeps is the verifier's choice ("at most once a minute"),
   * within bounds: at least every reading at an accepted payment and at a refusal by time (else a
   * clock set back revives what was seen expire), at most the highest reading (never a payer's time).
   */
  floor = 0;
  floorRequired = 0;
  clockSeen: number;

  constructor(root: Link, clock: number) {
    this.links.set(root.key, root);
    this.clock = clock;
    this.clockSeen = clock;
  }

  /** Leaf to root. */
  chain(key: string): Link[] {
    const out: Link[] = [];
    for (let l = this.links.get(key); l; l = l.parent === undefined ? undefined : this.links.get(l.parent)) out.push(l);
    return out;
  }

  wallet(holder: string): Ledger {
    let w = this.wallets.get(holder);
    if (!w) this.wallets.set(holder, (w = { entries: [], releasesHoldsAtExpiry: false }));
    return w;
  }

  /** What an entry still counts at `now` (§15: a merchant releases an uncaptured hold at its expiry). */
  static counted(ledger: Ledger, e: Entry, now: number): bigint {
    if (e.captured !== undefined) return e.captured;
    if (e.hold && ledger.releasesHoldsAtExpiry && now >= e.expiresAt) return 0n;
    return e.amount;
  }

  /**
   * A hold that moves nothing (released at its expiry, or voided): whether it still counts as one
   * of a window's `maxPayments` is not said by §13/§15 ("a release returns the amount"): either.
   */
  static movesNothing(ledger: Ledger, e: Entry, now: number): boolean {
    return e.hold && SpendModel.counted(ledger, e, now) === 0n;
  }

  /**
   * The counters of §13/§14 for a payment of `amount` under `chain`, counted at `at`: every link's
   * lifetime ceiling and each of its windows. A refusal names every full counter's code; a count
   * that is full only if holds that moved nothing count is tolerated either way.
   */
  static overLimits(ledger: Ledger, chain: Link[], amount: bigint, at: number, now: number): Verdict {
    const codes = new Set<string>();
    const maybe = new Set<string>();
    const resetsAt: number[] = [];
    for (const link of chain) {
      const mine = ledger.entries.filter((e) => e.chain.includes(link.key));
      const total = mine.reduce((s, e) => s + SpendModel.counted(ledger, e, now), 0n);
      if (total + amount > link.max) codes.add('budget_exceeded');
      for (const w of link.windows) {
        const k = windowIndex(w.every, link.windowsStart, at);
        const inWindow = mine.filter((e) => windowIndex(w.every, link.windowsStart, e.at) === k);
        const sum = inWindow.reduce((s, e) => s + SpendModel.counted(ledger, e, now), 0n);
        const paid = inWindow.filter((e) => !SpendModel.movesNothing(ledger, e, now)).length;
        const limit = w.maxPayments ?? Infinity;
        const next = windowStart(w.every, link.windowsStart, k + 1);
        if (sum + amount > w.max || paid + 1 > limit) {
          codes.add('window_exceeded');
          resetsAt.push(next);
        } else if (inWindow.length + 1 > limit) {
          maybe.add('window_exceeded');
          resetsAt.push(next);
        }
      }
    }
    if (codes.size) return { ok: false, codes: [...codes, ...maybe], ...(resetsAt.length ? { resetsAt } : {}) };
    return maybe.size ? { ok: true, tolerate: [...maybe] } : { ok: true };
  }

  /**
   * A wallet's time: max(host clock, its ledger's floor). A wallet has no host-kept floor, but its
   * ledger is one (§12: setting the clock back revives nothing, no window it has seen close opens
   * again), and it signs at that time (§13: a payment counts in the window of its SBA's issuedAt).
   * The floor holds at least the time of every payment the ledger counted and at most the highest
   * clock reading it was used at ("stored at most once a minute, and on every accepted payment"):
   * which readings in between it keeps is the wallet's choice, so a wallet's time is a range.
   */
  walletNow(holder: string): number {
    if (!this.walletLedgerClock) return this.clock;
    return this.wallet(holder).entries.reduce((t, e) => Math.max(t, e.at), this.clock);
  }

  /** The latest time a wallet may sign at: its clock readings kept too (see walletNow). */
  walletLatest(holder: string): number {
    if (!this.walletLedgerClock) return this.clock;
    return Math.max(this.walletNow(holder), this.walletSeen.get(holder) ?? 0);
  }

  /** The wallet's ledger was used at the clock's reading (a signature tried, a capture learnt). */
  walletTouch(holder: string): void {
    this.walletSeen.set(holder, Math.max(this.walletSeen.get(holder) ?? 0, this.walletLatest(holder)));
  }

  walletSeen = new Map<string, number>();

  /** Off: a wallet signs at the host clock (to look past §12 at what a set-back clock costs). */
  walletLedgerClock = true;

  /** The wallet signs under `leaf` at its time `t` (§12–§14; spec §3 rule 1: revocation is checked before signing). */
  sign(holder: string, leaf: string, amount: bigint, t = this.walletNow(holder)): Verdict {
    const chain = this.chain(leaf);
    const codes: string[] = [];
    if (chain.some((l) => l.revoked)) codes.push('grant_revoked');
    if (chain.some((l) => t >= l.expiresAt)) codes.push('grant_expired');
    if (codes.length) return { ok: false, codes };
    return SpendModel.overLimits(this.wallet(holder), chain, amount, t, t);
  }

  /** The SBA's expiry as the wallet signs it at `t`: its lifetime, never past the leaf (§4). */
  sbaExpiry(holder: string, leaf: string, ttl: number, t = this.walletNow(holder)): number {
    return Math.min(t + ttl, this.chain(leaf)[0]!.expiresAt);
  }

  record(ledger: Ledger, e: Entry): void {
    ledger.entries.push(e);
  }

  /** The merchant's floored clock (§12): every check uses max(clock, floor). */
  merchantNow(): number {
    this.clockSeen = Math.max(this.clockSeen, this.clock);
    return Math.max(this.clock, this.floor);
  }

  /** A reading the floor must keep: an accepted payment's, or a refusal by time (§12). */
  static readonly TIME_REFUSALS = ['grant_expired', 'sba_expired', 'hold_expired'];
  keepReading(accepted: boolean, code?: string): void {
    if (accepted || SpendModel.TIME_REFUSALS.includes(code!))
      this.floorRequired = Math.max(this.floorRequired, this.clock);
  }

  /** A live record of this SBA's id in its chain's scope (§7, §12: kept until its SBA expires). */
  liveRecord(ledger: Ledger, scope: string, budgetId: string, now: number): Entry | undefined {
    return ledger.entries.find((e) => e.scope === scope && e.budgetId === budgetId && now < e.expiresAt);
  }

  /**
   * §5 at a merchant that tracks spend, offline against Trust Bundles, in its order; the first
   * failing step gives the code. `sba` is what the SBA says; `requested` the payment amount.
   */
  verify(
    sba: { leaf: string; budgetId: string; max: bigint; issuedAt: number; expiresAt: number },
    requested: bigint,
  ): Verdict {
    const now = this.merchantNow();
    const chain = this.chain(sba.leaf);
    const root = chain[chain.length - 1]!;
    // step 1 and the chain walk of §14: each link's expiry and issuedAt
    if (now >= root.expiresAt) return { ok: false, codes: ['grant_expired'] };
    if (root.issuedAt > now) return { ok: false, codes: ['not_yet_valid'] };
    for (const l of [...chain].reverse()) {
      if (now >= l.expiresAt) return { ok: false, codes: ['grant_expired'] };
      if (l.issuedAt > now) return { ok: false, codes: ['not_yet_valid'] };
    }
    // step 2
    if (now >= sba.expiresAt) return { ok: false, codes: ['sba_expired'] };
    if (sba.issuedAt > now) return { ok: false, codes: ['not_yet_valid'] };
    // step 3: a revoked link revokes everything below it
    if (chain.some((l) => l.revoked)) return { ok: false, codes: ['grant_revoked'] };
    // step 4
    if (requested > sba.max) return { ok: false, codes: ['amount_exceeds_authorization'] };
    if (this.liveRecord(this.merchant, sba.leaf, sba.budgetId, now)) return { ok: false, codes: ['replay'] };
    const v = SpendModel.overLimits(this.merchant, chain, requested, now, now);
    // An id whose SBA has expired may be forgotten, or not yet (§12 says "only until"): either answer.
    const stale = this.merchant.entries.some((e) => e.scope === sba.leaf && e.budgetId === sba.budgetId);
    if (!stale) return v;
    return v.ok ? { ok: true, tolerate: [...(v.tolerate ?? []), 'replay'] } : { ...v, codes: [...v.codes, 'replay'] };
  }

  /** A hold the merchant accepted, by id (captureCtl names no chain). */
  merchantHold(budgetId: string): Entry | undefined {
    return this.merchant.entries.find((e) => e.hold && e.budgetId === budgetId);
  }

  /**
   * The merchant captures (§15): at most the hold, once, before the SBA's expiry. A revocation after
   * the hold was accepted does not stop it (the goods were delivered under a valid authorization).
   */
  merchantCapture(e: Entry, amount: bigint): Verdict {
    const now = this.merchantNow();
    const codes: string[] = [];
    // After the SBA's expiry its id may be forgotten and taken by a later SBA (§12), so a capture
    // then may meet that record: `replay` is as right as `hold_expired` (§15 names both).
    if (now >= e.expiresAt) codes.push('hold_expired', 'replay');
    if (e.captured !== undefined) codes.push('replay');
    if (codes.length) return { ok: false, codes };
    if (amount > e.amount) return { ok: false, codes: ['capture_exceeds_hold'] };
    return { ok: true };
  }

  /**
   * The wallet learns a capture from the merchant's receipt (§15, amended): once, at most the hold,
   * also after the SBA expired (only what the merchant signs releases a hold).
   */
  walletCapture(e: Entry, amount: bigint): Verdict {
    // A second capture is `replay`; once the SBA has expired (by the wallet's ledger clock, which a
    // clock set back does not lower) the ledger may have forgotten the id (§12: ledgers forget what
    // can no longer be replayed), and §15 names that case hold_expired: either refuses, nothing moves.
    if (e.captured !== undefined) return { ok: false, codes: ['replay', 'hold_expired'] };
    if (amount > e.amount) return { ok: false, codes: ['capture_exceeds_hold'] };
    return { ok: true };
  }

  /**
   * Delegation narrowing (§13, §14): what `createDelegation` must refuse. `windowsAboveOwn`: a
   * window above the link's own ceiling, `delegation_invalid` (issue item 8; §13 said malformed).
   */
  delegate(parentKey: string, child: Omit<Link, 'key' | 'revoked' | 'depth' | 'parent'>, maxDepth: number): Verdict {
    const parent = this.links.get(parentKey)!;
    const chain = this.chain(parentKey);
    const bad =
      child.max > parent.max ||
      child.expiresAt > parent.expiresAt ||
      child.issuedAt < parent.issuedAt ||
      parent.depth + 1 > maxDepth ||
      chain.some((l) => l.id === child.id) ||
      child.windows.some((w) => w.max > child.max) ||
      parent.windows.some((pw) => {
        const cw = child.windows.find((w) => w.every === pw.every);
        if (!cw || cw.max > pw.max) return true;
        return pw.maxPayments !== undefined && (cw.maxPayments === undefined || cw.maxPayments > pw.maxPayments);
      });
    // §13: 1–4 windows, else malformed (a shape rule, checked before or after narrowing: either code).
    const codes = [...(bad ? ['delegation_invalid'] : []), ...(child.windows.length > 4 ? ['malformed'] : [])];
    return codes.length ? { ok: false, codes } : { ok: true };
  }

  /** Everything accepted at `ledger` that still counts, per link and window: none may pass its bound. */
  static boundsViolated(ledger: Ledger, links: Iterable<Link>, now: number): string | undefined {
    for (const link of links) {
      const mine = ledger.entries.filter((e) => e.chain.includes(link.key));
      const total = mine.reduce((s, e) => s + SpendModel.counted(ledger, e, now), 0n);
      if (total > link.max) return `${link.id}: ${total} counted > ceiling ${link.max}`;
      for (const w of link.windows) {
        const byWindow = new Map<number, { sum: bigint; n: number }>();
        for (const e of mine) {
          const k = windowIndex(w.every, link.windowsStart, e.at);
          const s = byWindow.get(k) ?? { sum: 0n, n: 0 };
          s.sum += SpendModel.counted(ledger, e, now);
          if (!SpendModel.movesNothing(ledger, e, now)) s.n++;
          byWindow.set(k, s);
        }
        for (const [k, s] of byWindow) {
          const at = new Date(windowStart(w.every, link.windowsStart, k)).toISOString();
          if (s.sum > w.max) return `${link.id}: ${w.every} window from ${at} counts ${s.sum} > ${w.max}`;
          if (w.maxPayments !== undefined && s.n > w.maxPayments)
            return `${link.id}: ${w.every} window from ${at} has ${s.n} payments > ${w.maxPayments}`;
        }
      }
    }
    return undefined;
  }
}
