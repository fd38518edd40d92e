/**
 * `ctl/testing` (`dist/testing.js`): the checks an integrator runs against its own SpendStorage
 * (flash, SQLite, Redis…) before a wallet or a verifier trusts it with money (PROTOCOL.md §7, §12).
 * Test-time only: no wallet or verifier code comes with it. See docs/sdk-api.md.
 */
export {
  spendStorageConformance,
  type ConformanceCase,
  type ConformanceOptions,
} from '../testing/spend-storage-conformance.js';
export type {
  SpendStorage,
  ReserveResult,
  ReserveOptions,
  SpendCounter,
  ReserveManyOptions,
  ReserveManyResult,
  CommitManyResult,
} from '../wallet/spend-storage.js';
