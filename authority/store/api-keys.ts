/**
 * Admin API keys: stored by hash with their scopes, revoked once (the first `revokedAt` stays).
 * Plain SQL shared by SQLite and PostgreSQL, mixed into the AuthorityStore by sql-store.ts.
 */
import { changeWith, type SqlDatabase } from '../../service-kit/index.js';
import type { ApiKeyRow, AuthorityStore } from './types.js';

export type ApiKeyStore = Pick<AuthorityStore, 'putApiKey' | 'getApiKey' | 'listApiKeys' | 'revokeApiKey'>;

type ApiRow = {
  key_id: string;
  hash: string;
  scopes: string;
  label: string;
  created_at: string;
  created_by: string;
  revoked_at: string | null;
};

const apiFrom = (r: ApiRow): ApiKeyRow => ({
  keyId: r.key_id,
  hash: r.hash,
  scopes: JSON.parse(r.scopes) as string[],
  label: r.label,
  createdAt: r.created_at,
  createdBy: r.created_by,
  revokedAt: r.revoked_at,
});

export function createApiKeyStore(db: SqlDatabase): ApiKeyStore {
  return {
    async putApiKey(k, effect) {
      await changeWith(
        db,
        async (q) => {
          await q.run(
            'INSERT INTO api_keys (key_id, hash, scopes, label, created_at, created_by, revoked_at) ' +
              'VALUES (?, ?, ?, ?, ?, ?, ?)',
            [k.keyId, k.hash, JSON.stringify(k.scopes), k.label, k.createdAt, k.createdBy, k.revokedAt],
          );
        },
        effect,
      );
    },
    async getApiKey(keyId) {
      const r = await db.get<ApiRow>('SELECT * FROM api_keys WHERE key_id = ?', [keyId]);
      return r && apiFrom(r);
    },
    async listApiKeys() {
      return (await db.all<ApiRow>('SELECT * FROM api_keys ORDER BY created_at, key_id')).map(apiFrom);
    },
    revokeApiKey(keyId, at, effect) {
      return changeWith(
        db,
        async (q) => {
          const { changes } = await q.run(
            'UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL',
            [at, keyId],
          );
          const r = await q.get<{ revoked_at: string | null }>('SELECT revoked_at FROM api_keys WHERE key_id = ?', [
            keyId,
          ]);
          return r && r.revoked_at !== null ? { revokedAt: r.revoked_at, changed: changes === 1 } : undefined;
        },
        effect && (async (q, r) => (r ? effect(q, r) : undefined)),
      );
    },
  };
}
