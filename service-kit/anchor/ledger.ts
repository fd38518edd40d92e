/**
 * A ledger the chain outbox writes to: an EVM chain (evm.ts), a Bitcoin-family chain (btc.ts)
 * or the local file of development (file.ts). The outbox never trusts a send: it signs a
 * transaction and records it (`prepare`) before broadcasting it, so a crash between the two
 * rebroadcasts the same transaction rather than making another, and it counts a job done only
 * once the ledger shows the transaction `confirmations` deep.
 */
import type { AnchorHead, HeadSource } from './head.js';

/**
 * An anchor: the head written on the ledger, what it is the head of, and for a checkpoint the
 * signed note it was read from (the record an operator hands a verifier). Rows written before
 * `source` existed anchored the audit head (store.ts reads them so).
 */
export interface AnchorJob {
  kind: 'anchor';
  head: AnchorHead;
  source: HeadSource;
  /** The C2SP checkpoint note, signatures included (`source: 'checkpoint'`). */
  checkpoint?: string;
}

/** What the outbox writes: a log's head, or a revocation token (contracts/CtlRevocationTokens.sol). */
export type ChainJob =
  | AnchorJob
  /** `id`: 64 hex (the grant's hash or a link's revocation id); `expiresAt`: unix seconds. */
  | { kind: 'revocation'; id: string; expiresAt: number };

export type JobKind = ChainJob['kind'];

/** A signed transaction, not yet (or perhaps) broadcast. */
export interface PreparedTx {
  txid: string;
  /** The serialized signed transaction (hex), rebroadcast as it is. */
  raw: string;
}

export type TxStatus =
  | { state: 'mined'; blockNumber: number; blockHash: string; confirmations: number }
  /** Known to the node, not in a block yet. */
  | { state: 'pending' }
  /** The node knows nothing of it: broadcast it again. */
  | { state: 'unknown' }
  /** It can never be mined (its nonce or inputs were used by another transaction): prepare a new one. */
  | { state: 'dropped'; reason: string };

/** Thrown by `broadcast` when the transaction can never be accepted (prepare a new one). */
export class TxRejected extends Error {}

export interface Ledger {
  /** `evm`, `btc`, `file`: the label of metrics, events and outbox rows. */
  readonly name: string;
  /** Depth at which a job counts as done. */
  readonly confirmations: number;
  /** The job kinds this ledger carries. */
  readonly kinds: readonly JobKind[];
  /** Builds and signs the transaction of `job`; sends nothing. */
  prepare(job: ChainJob): Promise<PreparedTx>;
  /** Sends a prepared transaction; a node that already has it is success. Throws TxRejected when it never can be. */
  broadcast(tx: PreparedTx): Promise<void>;
  status(tx: PreparedTx): Promise<TxStatus>;
  close?(): Promise<void>;
}
