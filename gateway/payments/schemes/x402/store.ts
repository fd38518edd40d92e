/**
 * x402's table of the authorizations it signed (evm/authorizations.ts writes and reads it): the
 * common columns, plus the x402 version the 402 spoke (`dialect`) and, for `upto` (PROTOCOL.md
 * §15), the scheme, the amount settled and the chain's head when the permit was signed.
 */
import type { Migration, SqlExecutor } from '../../../../service-kit/index.js';
import { insertAuthorization, recordAuthorizationOutcome, type AuthorizationInput } from '../../evm/authorizations.js';

export const X402_TABLE = 'gw_x402_payments';

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

/** x402's own columns of a signed authorization's row. */
export function x402Columns(o: { version: string; scheme?: string; fromBlock?: bigint }) {
  return { dialect: o.version, scheme: o.scheme ?? null, from_block: o.fromBlock?.toString() ?? null };
}

/** Writes a signed x402 authorization (the exchange does, before it leaves; tests set up crashes). */
export async function insertX402(
  q: SqlExecutor,
  r: AuthorizationInput & { version: string; scheme?: string; fromBlock?: bigint },
  now: number,
): Promise<void> {
  const { version, scheme, fromBlock, ...common } = r;
  await insertAuthorization(q, X402_TABLE, common, x402Columns({ version, scheme, fromBlock }), now);
}

/** Records what the merchant said of an x402 payment (evm/authorizations.ts recordAuthorizationOutcome). */
export function recordOutcome(q: SqlExecutor, paymentId: string, outcome: string, tx?: string, settled?: bigint) {
  return recordAuthorizationOutcome(q, X402_TABLE, paymentId, outcome, tx, settled);
}
