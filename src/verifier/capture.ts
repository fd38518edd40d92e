/**
 * The capture of a hold a verifier accepted (PROTOCOL.md §15): a hold SBA is verified for its
 * maximum, which stays reserved in every counter it touched (the grant's, its windows, the links
 * of its chain, the offline allowance) until the merchant captures what was used, once, before
 * the SBA expires. The hold lives in the SpendStorage the verification used, never in this
 * process's memory: a verifier restarted between hold and capture captures it all the same, and
 * a hold never captured goes back at the SBA's expiry (the storage's `releaseAt`).
 *
 * A capture checks no revocation: the hold was accepted under a valid authorization and the goods
 * were delivered under it, so a grant revoked meanwhile does not undo what was served.
 */
import { toErrorInfo, malformed, type CtlErrorInfo } from '../errors.js';
import { captureHold } from '../wallet/holds.js';
import type { SpendStorage } from '../wallet/spend-storage.js';
import { claimStorage, LEDGER_CLOCK_KEYS, ledgerNow, reservationId } from '../wallet/ledgers.js';
import { chainScope } from '../artifacts/link-revocation.js';
import { checkSba } from '../artifacts/sba.js';
import { chainOf } from '../artifacts/delegation.js';
import { artifactData } from '../encoding/frozen-copy.js';
import { readFlooredTime, type TimeFloor } from './time-floor.js';
import { hostNow } from '../host.js';

export interface CaptureOptions {
  /**
   * The storage the verification used (`spendStorage` of `verifyCtl`); without one, the verifier's
   * own memory, as the verification without one. The hold is found there and nowhere else.
   */
  spendStorage?: SpendStorage;
  /** The verifier's clock (default the host's), read against `timeFloor` as at verification. */
  now?: () => number;
  timeFloor?: TimeFloor;
}

export type CaptureResult = { captured: true; amountMinor: string } | { captured: false; error: CtlErrorInfo };

/**
 * Captures `amount` minor units of a verified hold, named by the `holdId` of `verifyCtl`'s result
 * (persist it to capture after a restart) or by the SBA itself. Never throws.
 */
export type CaptureCtl = (hold: string | object, amount: string, options?: CaptureOptions) => Promise<CaptureResult>;

/** `grant:<grantId>[#<32 hex>]|<budgetId>`: what `holdId` is (the reservation's id, `reservationId`). */
const HOLD_ID = /^grant:[A-Za-z0-9._:-]{1,128}(#[0-9a-f]{32})?\|[A-Za-z0-9._:-]{1,128}$/;

/**
 * The reservation a hold lives under: its scope is the chain that signed it (PROTOCOL.md §7), so
 * a bare `budgetId`, which anyone may put in an SBA of their own, names no hold.
 */
export function holdIdOf(hold: unknown): string {
  if (typeof hold === 'string') {
    if (!HOLD_ID.test(hold))
      malformed('hold: pass the holdId of the verification result, or the SBA (a budgetId alone names no hold)');
    return hold;
  }
  const sba = artifactData(hold);
  checkSba(sba);
  if (sba.authorization.capture !== 'hold') malformed('hold: this SBA is not a hold (authorization.capture)');
  return reservationId({ scope: chainScope(chainOf(sba.grant), 'grant:'), id: sba.authorization.budgetId });
}

/** The capture of one verifier: `defaultStorage` is where it keeps spend when a call names none. */
export function createCaptureCtl(defaultStorage: SpendStorage): CaptureCtl {
  return async (hold, amount, options) => {
    try {
      const id = holdIdOf(hold);
      // The same reading of time as the verification: max(clock, floor) (PROTOCOL.md §12), and
      // without a host floor the ledger's own, raised before the storage drops what ended.
      const storage = options?.spendStorage ?? defaultStorage;
      await claimStorage(storage, 'verifier');
      const floored = (await readFlooredTime(options?.now ?? hostNow, options?.timeFloor)).now;
      // The storage drops what has expired by `now` (a replay id kept only until its SBA's expiry
      // under a host floor): the floor holds `now` first, so a clock set back revives none of it.
      if (options?.timeFloor) await options.timeFloor.raise(floored);
      const now = options?.timeFloor ? floored : await ledgerNow(storage, LEDGER_CLOCK_KEYS.verifier, floored);
      const captured = await captureHold(storage, id, amount, now);
      return { captured: true, amountMinor: captured.toString() };
    } catch (e) {
      return { captured: false, error: toErrorInfo(e) };
    }
  };
}
