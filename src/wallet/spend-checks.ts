/**
 * Argument checks and the capture arithmetic every SpendStorage shares, so the storages agree to
 * the unit and refuse the same inputs (PROTOCOL.md §7, §12, §15).
 */
import type { SpendCounter } from './spend-storage.js';

/** Checks a counter list before a reserve touches anything. Throws RangeError. */
export function checkCounters(counters: readonly SpendCounter[]): void {
  if (!Array.isArray(counters) || counters.length === 0) throw new RangeError('reserveMany: counters must be a list');
  const seen = new Set<string>();
  for (const c of counters) {
    if (typeof c.key !== 'string' || seen.has(c.key)) throw new RangeError('reserveMany: each key at most once');
    seen.add(c.key);
    if (typeof c.amount !== 'bigint' || c.amount < 0n || typeof c.ceiling !== 'bigint')
      throw new RangeError('reserveMany: amount and ceiling must be bigints, amount ≥ 0');
    checkTime(c.ledgerExpiresAt, 'ledgerExpiresAt');
  }
}

/**
 * Time is a number or nothing (PROTOCOL.md §12): a `now` of NaN reads every id as expired (each
 * `expiresAt > now` is false), so it would forget every id and release every hold. Throws RangeError.
 */
export function checkTimes(options: { now?: number; expiresAt?: number; releaseAt?: number } | undefined): void {
  checkTime(options?.now, 'now');
  checkTime(options?.expiresAt, 'expiresAt');
  checkTime(options?.releaseAt, 'releaseAt');
}

/** A time option: absent, or a finite number of ms. Throws RangeError naming it. */
export function checkTime(t: unknown, name: string): void {
  if (t !== undefined && (typeof t !== 'number' || !Number.isFinite(t)))
    throw new RangeError(`spend storage: ${name} must be a finite number of ms`);
}

/**
 * The capture of a reservation's amount counters at `captured`: the new amounts, or undefined
 * when `captured` is above one of them. Shared by the storages so they agree to the unit.
 */
export function capturedAmounts(
  parts: readonly { amount: bigint; count?: boolean }[],
  captured: bigint | undefined,
): bigint[] | undefined {
  if (captured === undefined) return parts.map((p) => p.amount);
  if (typeof captured !== 'bigint' || captured < 0n) throw new RangeError('commitMany: captured must be a bigint ≥ 0');
  if (parts.some((p) => !p.count && captured > p.amount)) return undefined;
  return parts.map((p) => (p.count ? p.amount : captured));
}
