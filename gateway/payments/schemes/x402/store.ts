/**
 * What the gateway remembers of each x402 authorization it signed: enough to know
 * when it stops being cashable (`valid_before`) and whether a transaction was ever named for it.
 * Written before the payment header leaves the gateway, so reconcile() never forgets a signature
 * that is out in the world.
 */
import type { Migration, SqlExecutor } from '../../../../service-kit/index.js';

export const X402_MIGRATIONS: Migration[] = [
  {
    id: 'gateway-x402-001',
    sql: `CREATE TABLE IF NOT EXISTS gw_x402_payments (
        payment_id TEXT PRIMARY KEY, dialect TEXT NOT NULL, network TEXT NOT NULL, asset TEXT NOT NULL,
        pay_to TEXT NOT NULL, payer TEXT NOT NULL, nonce TEXT NOT NULL, valid_before BIGINT NOT NULL,
        tx TEXT, outcome TEXT, created_at BIGINT NOT NULL)`,
  },
  // x402 `upto` (PROTOCOL.md §15): a Permit2 permit for a maximum, of which the facilitator settles part.
  { id: 'gateway-x402-002', sql: `ALTER TABLE gw_x402_payments ADD COLUMN scheme TEXT` },
  { id: 'gateway-x402-003', sql: `ALTER TABLE gw_x402_payments ADD COLUMN settled TEXT` },
  // `upto`: the chain's head when the permit was signed, where the search for its settle starts.
  { id: 'gateway-x402-004', sql: `ALTER TABLE gw_x402_payments ADD COLUMN from_block TEXT` },
];

export interface X402Record {
  paymentId: string;
  /** The x402 version the 402 spoke (stored in column `dialect`). */
  version: string;
  network: string;
  asset: string;
  payTo: string;
  payer: string;
  nonce: string;
  /** Epoch milliseconds: the authorization's `validBefore`. */
  validBefore: number;
  tx: string | null;
  outcome: string | null;
  /**
   * `upto`: a Permit2 witness transfer of at most the payment's amount (`nonce` a decimal uint256,
   * `validBefore` its deadline); null: `exact`, an EIP-3009 authorization of the whole amount.
   */
  scheme: string | null;
  /** `upto`: the atomic amount the merchant's facilitator said it settled. */
  settled: string | null;
  /** `upto`: the chain's head when the permit was signed (null: no reader numbered blocks then). */
  fromBlock: bigint | null;
}

export async function insertX402(
  q: SqlExecutor,
  r: Omit<X402Record, 'tx' | 'outcome' | 'scheme' | 'settled' | 'fromBlock'> & { scheme?: string; fromBlock?: bigint },
  now: number,
): Promise<void> {
  await q.run(
    `INSERT INTO gw_x402_payments
       (payment_id, dialect, network, asset, pay_to, payer, nonce, valid_before, created_at, scheme, from_block)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      r.paymentId,
      r.version,
      r.network,
      r.asset,
      r.payTo,
      r.payer,
      r.nonce,
      r.validBefore,
      now,
      r.scheme ?? null,
      r.fromBlock?.toString() ?? null,
    ],
  );
}

/**
 * Records what the merchant said about the payment (`paid`, `refused`, `pending`, `unknown`,
 * `upto`'s `zero`), any transaction and, for `upto`, the amount settled.
 */
export async function recordOutcome(
  q: SqlExecutor,
  paymentId: string,
  outcome: string,
  tx?: string,
  settled?: bigint,
): Promise<void> {
  await q.run(
    `UPDATE gw_x402_payments SET outcome = ?, tx = COALESCE(?, tx), settled = COALESCE(?, settled)
     WHERE payment_id = ?`,
    [outcome, tx ?? null, settled?.toString() ?? null, paymentId],
  );
}

export async function x402ById(q: SqlExecutor, paymentId: string): Promise<X402Record | undefined> {
  const r = await q.get(`SELECT * FROM gw_x402_payments WHERE payment_id = ?`, [paymentId]);
  if (!r) return undefined;
  return {
    paymentId: r.payment_id as string,
    version: r.dialect as string,
    network: r.network as string,
    asset: r.asset as string,
    payTo: r.pay_to as string,
    payer: r.payer as string,
    nonce: r.nonce as string,
    validBefore: Number(r.valid_before),
    tx: (r.tx as string | null) ?? null,
    outcome: (r.outcome as string | null) ?? null,
    scheme: (r.scheme as string | null) ?? null,
    settled: (r.settled as string | null) ?? null,
    fromBlock: r.from_block === null || r.from_block === undefined ? null : BigInt(r.from_block as string),
  };
}
