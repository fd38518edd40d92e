/**
 * Random identifiers (payment, receipt, transaction, audit staging ids): the SDK's CSPRNG draws,
 * which come from a pool filled 4 KiB at a time (src/crypto/random.ts): the same bytes one call
 * into the CSPRNG per id would give, without that call (about 10 µs each on a busy gateway, two to
 * four of them per paid request). Each pool byte is handed out once and wiped as it goes.
 */
import { base64urlEncode, randomBytes } from '../src/index.js';

/**
 * `bytes` fresh random bytes as base64url (no padding).
 * @example const paymentId = `pay_${randomId(16)}`
 */
export function randomId(bytes = 16): string {
  if (!Number.isInteger(bytes) || bytes < 1 || bytes > 256)
    throw new RangeError(`randomId(bytes): expected 1–256, got ${bytes}`);
  return base64urlEncode(randomBytes(bytes));
}

/** Base 62 in ASCII order: fixed-width strings of it sort as the numbers they encode. */
const ORDERED = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * An id that sorts by creation time: the wall clock in milliseconds (8 characters of base 62,
 * ASCII order, good until the year 8800) then 96 random bits. Rows keyed by it are appended at
 * the right edge of their indexes instead of landing on a random page: the payments, receipts
 * and ledger rows of one group commit share their index pages (fewer pages written to the WAL,
 * fewer full-page images on PostgreSQL) and pages fill up instead of splitting half empty.
 * @example const receiptId = `rcpt_${timeOrderedId()}`
 */
export function timeOrderedId(nowMs = Date.now()): string {
  let t = Math.max(0, Math.floor(nowMs));
  let head = '';
  for (let i = 0; i < 8; i++) {
    head = ORDERED[t % 62]! + head;
    t = Math.floor(t / 62);
  }
  return head + randomId(12);
}
