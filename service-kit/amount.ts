/**
 * Amounts are minor units (PROTOCOL.md §1), carried as bigint from the merchant's terms to the
 * SQL parameters. SQLite returns integers as JS numbers, so every stored amount stays a safe
 * integer: terms, ceilings and charges above this bound are refused before anything is written.
 */
export const MAX_AMOUNT = BigInt(Number.MAX_SAFE_INTEGER);
