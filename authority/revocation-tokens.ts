/**
 * Revocation tokens on a ledger (spec §4.3 "minting … of revocation tokens on a ledger"): when a
 * grant or a delegation link is revoked, a token is queued in the chain outbox, in the
 * transaction of the audit entry that records the revocation, so every recorded revocation is
 * minted (contracts/CtlRevocationTokens.sol, by the outbox's timer). Its id is the grant's hash or
 * the link's revocation id (src/revocation-source.ts `revocationTokenId`, PROTOCOL.md §14); the
 * expiry recorded with it is the artifact's, after which (and a grace) the contract lets it burn.
 */
import type { AuditEntry, SqlExecutor } from '../service-kit/index.js';
import type { ChainOutbox } from '../service-kit/anchor/index.js';
import { revocationTokenId, type PolicyGrant } from '../src/index.js';

const seconds = (ms: number | string) => Math.ceil(Number(ms) / 1000);

/**
 * The audit hook: for a `grant.revoke` or `delegation.revoke` entry, the token to mint, queued in
 * `q` (the entry's transaction). Resolves to whether one was queued (then kick the outbox).
 */
export function revocationTokenHook(outbox: ChainOutbox) {
  return async (q: SqlExecutor, entry: AuditEntry): Promise<boolean> => {
    if (!outbox.carries('revocation')) return false;
    if (entry.action === 'grant.revoke') {
      const g = await q.get<{ grant_json: string; expires_at_ms: number | string }>(
        'SELECT grant_json, expires_at_ms FROM grants WHERE grant_id = ?',
        [entry.subject],
      );
      if (!g) return false;
      const id = revocationTokenId(JSON.parse(g.grant_json) as PolicyGrant);
      await outbox.enqueue(q, { kind: 'revocation', id, expiresAt: seconds(g.expires_at_ms) });
      return true;
    }
    if (entry.action === 'delegation.revoke') {
      const revocationId = (JSON.parse(entry.data) as { revocationId?: unknown }).revocationId;
      if (typeof revocationId !== 'string') return false;
      const d = await q.get<{ expires_at_ms: number | string }>(
        'SELECT expires_at_ms FROM delegation_revocations WHERE revocation_id = ?',
        [revocationId],
      );
      if (!d) return false;
      await outbox.enqueue(q, { kind: 'revocation', id: revocationId, expiresAt: seconds(d.expires_at_ms) });
      return true;
    }
    return false;
  };
}
