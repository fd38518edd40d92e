/**
 * Variable amounts (PROTOCOL.md §15): a hold reserves its maximum in every counter the payment
 * touches; a capture of at most the hold commits what was used and gives the rest back, once.
 * Shared by the wallet and the verifier, so both answer a capture with the same codes.
 */
import { CtlError } from '../errors.js';
import type { PolicyGrant } from '../artifacts/types.js';
import { parseAmount } from '../values.js';
import type { SpendStorage } from './spend-storage.js';
import { hasAtomicReserve, windowLedgers } from './ledgers.js';
import { formatTimestamp } from '../values.js';

/**
 * Captures `amount` (minor units, a decimal string; 0 is a void) of the hold reserved under
 * `reservation`, at `now` (the caller's floored clock). Whether it is too late is the storage's to
 * say: a merchant's hold carries its `releaseAt` (the SBA's expiry), a wallet's none (it keeps the
 * hold until it learns the capture, PROTOCOL.md §15). Throws `capture_exceeds_hold` (the hold
 * stays), `replay` (captured already), `hold_expired` (released at its expiry, or no such hold).
 * @example await captureHold(storage, 'grant:g1|bud_1', '1234', Date.now())
 */
export async function captureHold(
  storage: SpendStorage,
  reservation: string,
  amount: string,
  now: number,
): Promise<bigint> {
  const captured = parseAmount(amount, 'amount');
  if (!hasAtomicReserve(storage))
    throw new CtlError('unsupported_feature', 'this SpendStorage has no commitMany: it holds no hold to capture');
  const r = await storage.commitMany!(reservation, captured, { now });
  if (r === 'committed') return captured;
  if (r === 'exceeded') throw new CtlError('capture_exceeds_hold', `${amount} minor units is above the hold`);
  if (r === 'duplicate') throw new CtlError('replay', 'this hold was captured already');
  throw new CtlError('hold_expired', 'no live hold to capture: it expired or was released, or was never held here');
}

/** One budget window where it stands (PROTOCOL.md §13), as `remaining()` reports it. */
export interface WindowRemaining {
  every: string;
  remainingMinor: string;
  /** With `maxPayments`: how many payments the window still takes. */
  remainingPayments?: number;
  /** When the next window starts. */
  resetsAt: string;
}

/** Each window of `grant` at `now`: what it still takes and when it resets. */
export async function windowsRemaining(
  storage: SpendStorage,
  grant: PolicyGrant,
  now: number,
): Promise<WindowRemaining[]> {
  const out: WindowRemaining[] = [];
  const ledgers = windowLedgers(grant, 0n, now);
  for (const w of grant.windows ?? []) {
    const amount = ledgers.find((l) => !l.count && l.key.startsWith(`window:${grant.grantId}:${w.every}:`))!;
    const count = ledgers.find((l) => l.count && l.key.startsWith(`window-count:${grant.grantId}:${w.every}:`));
    const left = amount.ceiling - (await storage.total(amount.key));
    const entry: WindowRemaining = {
      every: w.every,
      remainingMinor: (left > 0n ? left : 0n).toString(),
      resetsAt: amount.resetsAt ?? formatTimestamp(now),
    };
    if (count) {
      const n = count.ceiling - (await storage.total(count.key));
      entry.remainingPayments = Number(n > 0n ? n : 0n);
    }
    out.push(entry);
  }
  return out;
}
