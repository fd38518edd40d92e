/**
 * The value rules of PROTOCOL.md §1. Every parser throws `CtlError('malformed')` naming the field,
 * so a refusal always says what was wrong.
 */
import { fail, malformed, type CtlErrorCode } from './errors.js';

const AMOUNT = /^(0|[1-9][0-9]{0,37})$/;
const CURRENCY = /^[A-Z0-9]{3,12}$/;
const PURPOSE_PART = /^[a-z0-9][a-z0-9._-]{0,62}$/;
const TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?Z$/;
const ISSUER = /^[\x21-\x7e]{1,256}$/;
const IDENTIFIER = /^[A-Za-z0-9._:-]{1,128}$/;
const HASH = /^[0-9a-f]{64}$/;

/** A `malformed` refusal naming the field. @example bad('grant.currency', 'must be a currency code') */
export function bad(field: string, why: string): never {
  malformed(`${field}: ${why}`);
}

/** True for a decimal string of a non-negative integer in minor units. @example isAmount('100') // true */
export function isAmount(value: unknown): value is string {
  return typeof value === 'string' && AMOUNT.test(value);
}

/** Parses an amount string with BigInt only. @example parseAmount('1500', 'amount') // 1500n */
export function parseAmount(value: unknown, field: string): bigint {
  if (!isAmount(value)) bad(field, 'must be a decimal string of minor units, e.g. "1500"');
  return BigInt(value);
}

/** As parseAmount, and > 0: a payment amount. @example parsePaymentAmount('1', 'amount') // 1n */
export function parsePaymentAmount(value: unknown, field: string): bigint {
  const n = parseAmount(value, field);
  if (n === 0n) bad(field, 'a payment amount must be greater than zero');
  return n;
}

/** @example isCurrency('USDC') // true */
export function isCurrency(value: unknown): value is string {
  return typeof value === 'string' && CURRENCY.test(value);
}

export function parseCurrency(value: unknown, field: string): string {
  if (!isCurrency(value)) bad(field, 'must be a currency or asset code such as "USD"');
  return value;
}

/** `<domain>:<kind>`. @example isPurpose('ev:charging') // true */
export function isPurpose(value: unknown): value is string {
  if (typeof value !== 'string') return false;
  const at = value.indexOf(':');
  return at > 0 && PURPOSE_PART.test(value.slice(0, at)) && PURPOSE_PART.test(value.slice(at + 1));
}

/**
 * A purpose or `<domain>:*` (an allow-list entry; a bare `*` is not one). @example isPurposePattern('api:*') // true
 */
export function isPurposePattern(value: unknown): value is string {
  if (typeof value !== 'string') return false;
  if (value.endsWith(':*')) return PURPOSE_PART.test(value.slice(0, -2));
  return isPurpose(value);
}

/**
 * Whether an allow list admits a purpose; an empty list admits nothing. @example purposeAllowed('api:search',
 * ['api:*']) // true
 */
export function purposeAllowed(purpose: string, allowList: readonly string[]): boolean {
  const domain = purpose.slice(0, purpose.indexOf(':'));
  for (const p of allowList) if (p === purpose || p === domain + ':*') return true;
  return false;
}

/**
 * RFC 3339 UTC with `Z` → milliseconds (with sub-ms fraction kept). @example parseTimestamp('2026-11-22T10:00:00Z',
 * 'expiresAt')
 */
export function parseTimestamp(value: unknown, field: string): number {
  // Artifacts repeat the same few timestamps on every verification: remember recent ones.
  const hit = typeof value === 'string' ? recentTimestamps.get(value) : undefined;
  if (hit !== undefined) return hit;
  const ms = parseTimestampUncached(value, field);
  if (recentTimestamps.size >= 256) recentTimestamps.clear();
  recentTimestamps.set(value as string, ms);
  return ms;
}

const recentTimestamps = new Map<string, number>();

function parseTimestampUncached(value: unknown, field: string): number {
  const m = typeof value === 'string' ? TIMESTAMP.exec(value) : null;
  if (!m) bad(field, 'must be an RFC 3339 UTC timestamp such as "2026-11-22T10:00:00Z"');
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const ms = Date.UTC(y, mo - 1, d, h, mi, s);
  const back = new Date(ms);
  // Date.UTC rolls 2026-02-30 over to March: a round trip catches every impossible date.
  if (
    y < 1970 ||
    mo < 1 ||
    mo > 12 ||
    h > 23 ||
    mi > 59 ||
    s > 59 ||
    back.getUTCDate() !== d ||
    back.getUTCMonth() !== mo - 1
  ) {
    bad(field, 'is not a valid date and time');
  }
  return m[7] ? ms + Number('0.' + m[7]) * 1000 : ms;
}

/**
 * An artifact's validity window (PROTOCOL.md §5): refused with `expired` from `expiresAt` on, and
 * `not_yet_valid` before `issuedAt`, each with `tol` ms of clock tolerance.
 * @example checkWindow(grant, 'grant', 'grant', 'grant_expired', now, 0)
 */
export function checkWindow(
  x: { issuedAt: string; expiresAt: string },
  name: string,
  field: string,
  expired: CtlErrorCode,
  now: number,
  tol: number,
): void {
  if (now >= parseTimestamp(x.expiresAt, `${field}.expiresAt`) + tol)
    fail(expired, `the ${name} expired at ${x.expiresAt}`);
  if (parseTimestamp(x.issuedAt, `${field}.issuedAt`) > now + tol)
    fail('not_yet_valid', `the ${name} is issued in the future (${x.issuedAt})`);
}

/**
 * Reads a clock (PROTOCOL.md §12: time is a number or nothing). A reading that is not a finite
 * number (NaN, a string, `undefined` from a broken clock) would make every `now >= expiresAt`
 * false, so it is refused here, where it enters, never passed on as "no check".
 * @example const now = readClock(options.now ?? hostNow, 'options.now')
 */
export function readClock(clock: () => unknown, field: string): number {
  if (typeof clock !== 'function') bad(field, 'must be a function returning milliseconds since the epoch');
  const t = clock();
  if (typeof t !== 'number' || !Number.isFinite(t))
    bad(`${field}()`, `returned ${describeTime(t)}, not finite milliseconds since the epoch`);
  return t;
}

/** The most any time option may be: a day. A tolerance or a cache longer than that is a mistake, not a setting. */
export const MAX_TIME_OPTION_MS = 86_400_000;

/**
 * A time option in milliseconds (a tolerance, a TTL, a timeout): absent gives `fallback`; anything
 * but a finite number from 0 to `max` (default a day) is `malformed` (a `'0'` read from an
 * environment variable included; `1e300` would switch every expiry check off).
 * @example const tol = timeOption(options.clockToleranceMs, 'options.clockToleranceMs', 0)
 */
export function timeOption(value: unknown, field: string, fallback: number, max = MAX_TIME_OPTION_MS): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > max) {
    bad(field, `must be a number of milliseconds from 0 to ${max}, not ${describeTime(value)}`);
  }
  return value;
}

function describeTime(v: unknown): string {
  return typeof v === 'number'
    ? String(v)
    : typeof v === 'string'
      ? `the string ${JSON.stringify(v.slice(0, 32))}`
      : typeof v;
}

/** True when parseTimestamp would accept it. */
export function isTimestamp(value: unknown): value is string {
  try {
    parseTimestamp(value, 'timestamp');
    return true;
  } catch {
    return false;
  }
}

/**
 * Milliseconds → `2026-11-22T10:00:00Z` (a `.sss` fraction only when non-zero). @example formatTimestamp(0) //
 * '1970-01-01T00:00:00Z'
 */
export function formatTimestamp(ms: number): string {
  const iso = new Date(Math.floor(ms)).toISOString();
  return iso.endsWith('.000Z') ? iso.slice(0, -5) + 'Z' : iso;
}

/** @example isIssuer('authority.example') // true */
export function isIssuer(value: unknown): value is string {
  return typeof value === 'string' && ISSUER.test(value);
}

/** grantId, sessionId, budgetId, receiptId, bundleId, keyId. @example isIdentifier('grant_1') // true */
export function isIdentifier(value: unknown): value is string {
  return typeof value === 'string' && IDENTIFIER.test(value);
}

/** Lowercase hex SHA-256. */
export function isHash(value: unknown): value is string {
  return typeof value === 'string' && HASH.test(value);
}

/** A JSON counter: a safe integer ≥ 0. */
export function isCounter(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}
