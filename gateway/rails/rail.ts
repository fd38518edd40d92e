/**
 * Payment rails are pluggable (spec §4.2). A rail must be idempotent by payment id: paying the
 * same id twice pays once, and `settle` after a crash either finds the payment or makes sure
 * it can never happen (so a late `pay` of a settled-unpaid id is refused). That pair is what
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
  /** Pays once per paymentId and returns `txid:<reference>`; throws RailError when refused. */
  pay(order: PaymentOrder): Promise<{ txRef: string }>;
  /** After a crash: the txRef if the payment was made, else undefined and the id is voided. */
  settle(paymentId: string): Promise<{ txRef: string } | undefined>;
}

export class RailError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RailError';
  }
}
