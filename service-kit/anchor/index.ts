/**
 * Anchoring logs on ledgers and minting revocation tokens (spec §4.3), shared by both services
 * and `ctl anchor`: the heads anchored (head.ts: a log's signed checkpoint, or the audit head),
 * the ledgers (evm.ts, btc.ts, file.ts), the durable chain outbox (outbox.ts, store.ts),
 * configuration (config.ts), wiring (service.ts) and checking an anchor on its chain (verify.ts).
 */
export {
  checkAnchorHead,
  headOfCheckpoint,
  btcAnchorPayload,
  parseBtcAnchorPayload,
  opReturnData,
  type AnchorHead,
  type HeadSource,
} from './head.js';
export {
  TxRejected,
  type AnchorJob,
  type ChainJob,
  type JobKind,
  type Ledger,
  type PreparedTx,
  type TxStatus,
} from './ledger.js';
export { createEvmLedger, type EvmLedgerOptions } from './evm.js';
export { createBtcLedger, type BtcLedgerOptions } from './btc.js';
export { createFileLedger, type FileLedger } from './file.js';
export { chainOutboxMigration, type ChainJobRecord, type ChainJobStatus } from './store.js';
export {
  createChainOutbox,
  type AnchorSource,
  type ChainEvent,
  type ChainEventType,
  type ChainOutbox,
  type ChainOutboxOptions,
} from './outbox.js';
export {
  anchorSettingsFromEnv,
  anchoringConfigured,
  openLedgers,
  openEvmAnchorSigner,
  type AnchorSettings,
  type EvmAnchorSettings,
  type BtcAnchorSettings,
} from './config.js';
export {
  auditHeadSource,
  checkpointSource,
  auditOrigin,
  openServiceAnchoring,
  openServiceLedgers,
  createServiceChainOutbox,
  type ServiceAnchoringOptions,
} from './service.js';
export {
  verifyAnchors,
  type AnchorCheck,
  type AnchorCandidate,
  type AnchorRef,
  type VerifyAnchorsInput,
} from './verify.js';
