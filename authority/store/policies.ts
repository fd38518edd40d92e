/**
 * Policy documents by hash: each stored once, the first `storedAt` kept. Plain SQL shared by
 * SQLite and PostgreSQL, mixed into the AuthorityStore by sql-store.ts.
 */
import { changeWith, type SqlDatabase } from '../../service-kit/index.js';
import type { AuthorityStore } from './types.js';

export type PolicyStore = Pick<AuthorityStore, 'putPolicy' | 'getPolicy'>;

export function createPolicyStore(db: SqlDatabase): PolicyStore {
  return {
    putPolicy(policyHash, document, at, effect) {
      return changeWith(
        db,
        async (q) => {
          const inserted = await q.all<{ stored_at: string }>(
            'INSERT INTO policies (policy_hash, document, stored_at) VALUES (?, ?, ?) ON CONFLICT ' +
              '(policy_hash) DO NOTHING RETURNING stored_at',
            [policyHash, document, at],
          );
          if (inserted.length === 1) return { policyHash, storedAt: inserted[0].stored_at, created: true };
          const row = await q.get<{ stored_at: string }>('SELECT stored_at FROM policies WHERE policy_hash = ?', [
            policyHash,
          ]);
          return { policyHash, storedAt: row!.stored_at, created: false };
        },
        effect,
      );
    },
    async getPolicy(policyHash) {
      const r = await db.get<{ policy_hash: string; document: string; stored_at: string }>(
        'SELECT * FROM policies WHERE policy_hash = ?',
        [policyHash],
      );
      return r && { policyHash: r.policy_hash, document: r.document, storedAt: r.stored_at };
    },
  };
}
