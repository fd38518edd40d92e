/**
 * The holds a verifier accepted and may still capture (PROTOCOL.md §15): a hold SBA is verified
 * for its maximum, which stays reserved in every counter it touched (the grant's, its windows,
 * the offline allowance) until the merchant captures what was used, once, before the SBA expires.
 * A hold never captured goes back when the storage sweeps it at its expiry.
 */
import { CtlError, toErrorInfo, type CtlErrorInfo } from '../errors.js';
import { captureHold } from '../wallet/holds.js';
import type { SpendStorage } from '../wallet/spend-storage.js';
import type { TimeFloor } from './time-floor.js';
import { hostNow } from '../host.js';
import { readClock } from '../values.js';

export interface CaptureOptions {
  /** The verifier's clock (default the host's), read against `timeFloor` as at verification. */
  now?: () => number;
  timeFloor?: TimeFloor;
}

export type CaptureResult = { captured: true; amountMinor: string } | { captured: false; error: CtlErrorInfo };

/** Captures the verified hold `budgetId` at `amount` minor units. Never throws. */
export type CaptureCtl = (budgetId: string, amount: string, options?: CaptureOptions) => Promise<CaptureResult>;

interface Held {
  storage: SpendStorage;
  reservation: string;
  /** When the hold can no longer be captured: the SBA's expiry (PROTOCOL.md §15). */
  expiresAt: number;
}

export function createHoldBook() {
  const held = new Map<string, Held>();
  const forgetExpired = (now: number) => {
    for (const [id, h] of held) if (h.expiresAt <= now) held.delete(id);
  };
  const capture: CaptureCtl = async (budgetId, amount, options) => {
    try {
      const clock = readClock(options?.now ?? hostNow, 'options.now');
      const floor = options?.timeFloor ? await options.timeFloor.get() : 0;
      const now = Math.max(clock, typeof floor === 'number' && Number.isFinite(floor) ? floor : Infinity);
      const h = held.get(budgetId);
      if (!h)
        throw new CtlError('hold_expired', `no hold ${String(budgetId)} to capture: expired, or never verified here`);
      // Kept until it expires, captured or not: a second capture is then `replay`, not unknown.
      const captured = await captureHold(h.storage, h.reservation, amount, now, h.expiresAt);
      return { captured: true, amountMinor: captured.toString() };
    } catch (e) {
      return { captured: false, error: toErrorInfo(e) };
    }
  };
  return {
    /**
     * Keeps a hold that was just reserved, for its capture. False when a live hold of another
     * grant already answers to `budgetId`: a capture names only the budgetId, which is on the
     * wire, so a second hold under it would take over the first one's capture.
     */
    record(budgetId: string, h: Held, now: number): boolean {
      forgetExpired(now);
      if (held.has(budgetId)) return false;
      held.set(budgetId, h);
      return true;
    },
    capture,
  };
}
