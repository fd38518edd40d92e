/**
 * What the gateway remembers of each MPP credential it signed (an EIP-3009 authorization inside
 * an `Authorization: Payment` credential): enough to know when it stops being cashable
 * (`valid_before`) and whether the merchant's `Payment-Receipt` ever named a transaction for it.
 * Written before the credential leaves the gateway, so reconcile() never forgets one that is out.
 */
import type { Migration, SqlExecutor } from '../../../../service-kit/index.js';

export const MPP_MIGRATIONS: Migration[] = [
  {
    id: 'gateway-mpp-001',
    sql: `CREATE TABLE IF NOT EXISTS gw_mpp_payments (
        payment_id TEXT PRIMARY KEY, challenge_id TEXT NOT NULL, realm TEXT NOT NULL, method TEXT NOT NULL,
        network TEXT NOT NULL, asset TEXT NOT NULL, pay_to TEXT NOT NULL, payer TEXT NOT NULL,
        nonce TEXT NOT NULL, valid_before BIGINT NOT NULL, tx TEXT, outcome TEXT, created_at BIGINT NOT NULL)`,
  },
];

export interface MppRecord {
  paymentId: string;
  challengeId: string;
  realm: string;
  method: string;
  network: string;
  asset: string;
  payTo: string;
  payer: string;
  nonce: string;
  /** Epoch milliseconds: the authorization's `validBefore`. */
  validBefore: number;
  tx: string | null;
  outcome: string | null;
}

export async function insertMpp(q: SqlExecutor, r: Omit<MppRecord, 'tx' | 'outcome'>, now: number): Promise<void> {
  await q.run(
    `INSERT INTO gw_mpp_payments (payment_id, challenge_id, realm, method, network, asset, pay_to, payer, nonce,
       valid_before, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [r.paymentId, r.challengeId, r.realm, r.method, r.network, r.asset, r.payTo, r.payer, r.nonce, r.validBefore, now],
  );
}

/** Records what the merchant said (`paid`, `refused`, `unknown`, `expired-unverified`) and any transaction. */
export async function recordMppOutcome(q: SqlExecutor, paymentId: string, outcome: string, tx?: string): Promise<void> {
  await q.run(`UPDATE gw_mpp_payments SET outcome = ?, tx = COALESCE(?, tx) WHERE payment_id = ?`, [
    outcome,
    tx ?? null,
    paymentId,
  ]);
}

export async function mppById(q: SqlExecutor, paymentId: string): Promise<MppRecord | undefined> {
  const r = await q.get(`SELECT * FROM gw_mpp_payments WHERE payment_id = ?`, [paymentId]);
  if (!r) return undefined;
  return {
    paymentId: r.payment_id as string,
    challengeId: r.challenge_id as string,
    realm: r.realm as string,
    method: r.method as string,
    network: r.network as string,
    asset: r.asset as string,
    payTo: r.pay_to as string,
    payer: r.payer as string,
    nonce: r.nonce as string,
    validBefore: Number(r.valid_before),
    tx: (r.tx as string | null) ?? null,
    outcome: (r.outcome as string | null) ?? null,
  };
}
