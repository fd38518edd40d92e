/**
 * The `ledger` rail: a real local rail backed by the gateway's own store. A payment
 * is one row keyed by the payment id, so pay() is idempotent and outcome() can void an id that
 * never got paid. Merchants check a `txid` with GET /charge/{id}/verify (routes/merchant.ts).
 */
import { randomBytes } from 'node:crypto';
import type { SqlExecutor } from '../../service-kit/index.js';
import { RailError, type Rail } from './rail.js';

export interface LedgerEntry {
  paymentId: string;
  txRef: string;
  address: string;
  amount: bigint;
  currency: string;
  paidAt: number;
}

export function createLedgerRail(
  q: SqlExecutor,
  now: () => number = Date.now,
): Rail & {
  local: true;
  lookup(txRef: string): Promise<LedgerEntry | undefined>;
  paidTo(address: string): Promise<LedgerEntry[]>;
} {
  const toEntry = (r: Record<string, unknown>): LedgerEntry => ({
    paymentId: r.payment_id as string,
    txRef: r.tx_ref as string,
    address: r.address as string,
    amount: BigInt(r.amount as string),
    currency: r.currency as string,
    paidAt: Number(r.created_at),
  });
  return {
    name: 'ledger',
    // In the gateway's own database: payments/own-rail.ts pays and commits it in one change.
    local: true,
    async pay(order) {
      const txRef = `txid:${randomBytes(16).toString('base64url')}`;
      // One statement: inserts, or returns the row already there (same id paid or voided before).
      const row = await q.get(
        `INSERT INTO gw_ledger (payment_id, status, tx_ref, address, amount, currency, created_at)
         VALUES (?, 'paid', ?, ?, ?, ?, ?)
         ON CONFLICT (payment_id) DO UPDATE SET payment_id = excluded.payment_id
         RETURNING status, tx_ref, amount, currency, address`,
        [order.paymentId, txRef, order.address, order.amount, order.currency, now()],
      );
      if (!row || row.status !== 'paid') throw new RailError(`payment ${order.paymentId} was voided`);
      if (
        BigInt(row.amount as string) !== order.amount ||
        row.currency !== order.currency ||
        row.address !== order.address
      ) {
        throw new RailError(`payment ${order.paymentId} already exists with other terms`);
      }
      return { txRef: row.tx_ref as string };
    },
    async outcome(paymentId) {
      await q.run(
        `INSERT INTO gw_ledger (payment_id, status, created_at) VALUES (?, 'void', ?) ON CONFLICT DO NOTHING`,
        [paymentId, now()],
      );
      const row = await q.get(`SELECT status, tx_ref, amount FROM gw_ledger WHERE payment_id = ?`, [paymentId]);
      // Paid before its commit only as a hold's capture (payments/own-rail.ts capture): its amount
      // is what was captured. An exact payment is paid in its commit and never reconciled paid.
      return row?.status === 'paid'
        ? { txRef: row.tx_ref as string, hold: true as const, captured: BigInt(row.amount as string) }
        : undefined;
    },
    async lookup(txRef) {
      const row = await q.get(`SELECT * FROM gw_ledger WHERE tx_ref = ? AND status = 'paid'`, [txRef]);
      return row ? toEntry(row) : undefined;
    },
    async paidTo(address) {
      const rows = await q.all(
        `SELECT * FROM gw_ledger WHERE address = ? AND status = 'paid' ORDER BY created_at LIMIT 100`,
        [address],
      );
      return rows.map(toEntry);
    },
  };
}
