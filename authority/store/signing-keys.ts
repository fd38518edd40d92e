/**
 * The signing keys (grant and bundle purposes): stored, activated one per purpose and source
 * under a lock, leased by the instances that hold a key from their environment, and published
 * with the latest expiry of what each signed. Plain SQL shared by SQLite and PostgreSQL, mixed
 * into the AuthorityStore by sql-store.ts; bundles.ts reads the published list inside its
 * transaction.
 */
import { changeWith, type SqlDatabase, type SqlExecutor } from '../../service-kit/index.js';
import type { AuthorityStore, KeyPurposeName, PublishedKeyRow, SigningKeyRow } from './types.js';

export type SigningKeyStore = Pick<
  AuthorityStore,
  | 'putSigningKey'
  | 'replacePrivatePem'
  | 'getSigningKey'
  | 'activeSigningKey'
  | 'listSigningKeys'
  | 'activateSigningKey'
  | 'holdSigningKey'
  | 'ensureActiveSigningKey'
>;

type KeyRow = {
  kid: string;
  purpose: KeyPurposeName;
  alg: 'EdDSA' | 'ES256';
  status: 'active' | 'retired';
  public_jwk: string;
  public_pem: string;
  private_pem: string | null;
  source: 'generated' | 'env';
  created_at: string;
  retired_at: string | null;
  last_expiry?: number | string | null;
  last_seen_ms?: number | string | null;
};

const keyFrom = (r: KeyRow): SigningKeyRow => ({
  kid: r.kid,
  purpose: r.purpose,
  alg: r.alg,
  status: r.status,
  publicJwk: r.public_jwk,
  publicPem: r.public_pem,
  privatePem: r.private_pem,
  source: r.source,
  createdAt: r.created_at,
  retiredAt: r.retired_at,
});

const KEY_LOCK = 'ctl_authority_signing_keys';

async function insertKey(q: SqlExecutor, k: SigningKeyRow): Promise<boolean> {
  const rows = await q.all(
    `INSERT INTO signing_keys (kid, purpose, alg, status, public_jwk, public_pem, private_pem, source, created_at,
      retired_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (kid) DO NOTHING RETURNING kid`,
    [k.kid, k.purpose, k.alg, k.status, k.publicJwk, k.publicPem, k.privatePem, k.source, k.createdAt, k.retiredAt],
  );
  return rows.length === 1;
}

async function activate(q: SqlExecutor, kid: string, purpose: KeyPurposeName, at: string): Promise<void> {
  const { changes } = await q.run(
    `UPDATE signing_keys SET status = 'active', retired_at = NULL WHERE kid = ? AND purpose = ?`,
    [kid, purpose],
  );
  if (changes !== 1) throw new RangeError(`no ${purpose} key '${kid}'`);
  // Only keys of the same source: a key an instance holds from its environment is never retired
  // by another instance (it keeps signing with it).
  await q.run(
    `UPDATE signing_keys SET status = 'retired', retired_at = ?
     WHERE purpose = ? AND status = 'active' AND kid <> ? AND source = (SELECT source FROM signing_keys WHERE kid = ?)`,
    [at, purpose, kid, kid],
  );
}

async function activeKey(
  q: SqlExecutor,
  purpose: KeyPurposeName,
  source?: SigningKeyRow['source'],
): Promise<KeyRow | undefined> {
  return q.get<KeyRow>(
    `SELECT * FROM signing_keys WHERE purpose = ? AND status = 'active' ${source ? 'AND source = ?' : ''} ` +
      'ORDER BY created_at DESC, kid DESC LIMIT 1',
    source ? [purpose, source] : [purpose],
  );
}

export async function signingKeys(q: SqlExecutor): Promise<PublishedKeyRow[]> {
  const rows = await q.all<KeyRow>(
    `SELECT k.*, (SELECT MAX(g.expires_at_ms) FROM grants g WHERE g.key_id = k.kid) AS last_expiry
     FROM signing_keys k ORDER BY k.created_at, k.kid`,
  );
  return rows.map((r): PublishedKeyRow => ({
    ...keyFrom(r),
    lastGrantExpiryMs: r.last_expiry == null ? null : Number(r.last_expiry),
    lastSeenMs: r.last_seen_ms == null ? null : Number(r.last_seen_ms),
  }));
}

export function createSigningKeyStore(db: SqlDatabase): SigningKeyStore {
  return {
    putSigningKey: (row) => insertKey(db, row),
    async replacePrivatePem(kid, from, to) {
      return (
        (await db.run('UPDATE signing_keys SET private_pem = ? WHERE kid = ? AND private_pem = ?', [to, kid, from]))
          .changes === 1
      );
    },
    async getSigningKey(kid) {
      const r = await db.get<KeyRow>('SELECT * FROM signing_keys WHERE kid = ?', [kid]);
      return r && keyFrom(r);
    },
    async activeSigningKey(purpose, source) {
      const r = await activeKey(db, purpose, source);
      return r && keyFrom(r);
    },
    listSigningKeys: () => signingKeys(db),
    activateSigningKey(kid, purpose, at, effect) {
      return changeWith(db, (q) => activate(q, kid, purpose, at), effect, { lock: KEY_LOCK });
    },
    async holdSigningKey(kid, atMs) {
      // One statement; the lease never moves back (instances' clocks differ a little).
      const { changes } = await db.run(
        `UPDATE signing_keys SET status = 'active', retired_at = NULL,
           last_seen_ms = CASE WHEN last_seen_ms IS NULL OR last_seen_ms < ? THEN ? ELSE last_seen_ms END
         WHERE kid = ? AND source = 'env'`,
        [atMs, atMs, kid],
      );
      return changes === 1;
    },
    ensureActiveSigningKey(purpose, create, source) {
      return db.tx(
        async (q) => {
          const r = await activeKey(q, purpose, source);
          if (r) return { row: keyFrom(r), created: false };
          const row = await create();
          await insertKey(q, row);
          await activate(q, row.kid, purpose, row.createdAt);
          return { row: { ...row, status: 'active' as const }, created: true };
        },
        { lock: KEY_LOCK },
      );
    },
  };
}
