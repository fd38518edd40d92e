/**
 * Offline, a verifier records every budgetId it accepts (PROTOCOL.md §12). Tests that present one
 * SBA along many paths, to compare verdicts rather than to test replay, give it a fresh ledger at
 * every read of `spendStorage`: each call, and each spread of the options (the middleware spreads
 * its options per request).
 */
import { createMemorySpendStorage } from '../../src/index.js';

/**
 * `o` (a copy) whose `spendStorage` is a new memory ledger at every read. @example verifyCtl(sba, withFreshLedger({
 * ...opts, offline: true }))
 */
export function withFreshLedger<T extends object>(o: T): T {
  return Object.defineProperty({ ...o }, 'spendStorage', { get: () => createMemorySpendStorage(), enumerable: true });
}
