/**
 * MPP's table of the credentials it signed (an EIP-3009 authorization inside an
 * `Authorization: Payment` credential; evm/authorizations.ts writes and reads it): the common
 * columns, plus the challenge the credential answers.
 */
import type { Migration, SqlExecutor } from '../../../../service-kit/index.js';
import { insertAuthorization, recordAuthorizationOutcome, type AuthorizationInput } from '../../evm/authorizations.js';

export const MPP_TABLE = 'gw_mpp_payments';

export const MPP_MIGRATIONS: Migration[] = [
  {
    id: 'gateway-mpp-001',
    sql: `CREATE TABLE IF NOT EXISTS gw_mpp_payments (
        payment_id TEXT PRIMARY KEY, challenge_id TEXT NOT NULL, realm TEXT NOT NULL, method TEXT NOT NULL,
        network TEXT NOT NULL, asset TEXT NOT NULL, pay_to TEXT NOT NULL, payer TEXT NOT NULL,
        nonce TEXT NOT NULL, valid_before BIGINT NOT NULL, tx TEXT, outcome TEXT, created_at BIGINT NOT NULL)`,
  },
];

/** MPP's own columns of a signed credential's row. */
export function mppColumns(o: { challengeId: string; realm: string; method: string }) {
  return { challenge_id: o.challengeId, realm: o.realm, method: o.method };
}

/** Writes a signed MPP credential (the exchange does, before it leaves; tests set up crashes). */
export async function insertMpp(
  q: SqlExecutor,
  r: AuthorizationInput & { challengeId: string; realm: string; method: string },
  now: number,
): Promise<void> {
  const { challengeId, realm, method, ...common } = r;
  await insertAuthorization(q, MPP_TABLE, common, mppColumns({ challengeId, realm, method }), now);
}

/** Records what the merchant said of an MPP payment (evm/authorizations.ts recordAuthorizationOutcome). */
export function recordMppOutcome(q: SqlExecutor, paymentId: string, outcome: string, tx?: string) {
  return recordAuthorizationOutcome(q, MPP_TABLE, paymentId, outcome, tx);
}
