/**
 * Payment rails are pluggable (spec §4.2). A rail must be idempotent by payment id: paying the
 * same id twice pays once, and `outcome` after a crash either finds the payment or makes sure
 * it can never happen (so a late `pay` of an id found unpaid is refused). That pair is what
 * lets reconcile() promise "nothing paid twice, nothing paid and forgotten".
 */

export interface PaymentOrder {
  paymentId: string;
  amount: bigint;
  currency: string;
  /** The merchant's pay-to address from its X-Payment terms (spec §2.6). */
  address: string;
  /** The merchant host, for the rail's own records. */
  merchant: string;
}

export interface Rail {
  readonly name: string;
  /**
   * The rail lives in the gateway's own database (the ledger): its payment is made in the change
   * that commits it (store.ts payLedgerInCommit), never before.
   */
  readonly local?: true;
  /** Pays once per paymentId and returns `txid:<reference>`; throws RailError when refused. */
  pay(order: PaymentOrder): Promise<{ txRef: string }>;
  /**
   * After a crash or an unknown outcome: the txRef if the payment was made; undefined when it
   * provably never will be (the id is voided); `'pending'` when it may still happen (an x402
   * authorization signed and sent, not yet expired), so the reservation stays. `rail` is the
   * receipt's `rail` when it is not the rail's name (x402: network and asset). `hold`: the payment
   * was a hold (PROTOCOL.md §15), `captured` the amount that moved (absent: the whole hold).
   */
  outcome(paymentId: string): Promise<RailOutcome | undefined | 'pending'>;
}

export interface RailOutcome {
  txRef: string;
  rail?: string;
  hold?: true;
  captured?: bigint;
}

export class RailError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RailError';
  }
}
