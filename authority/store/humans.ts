/**
 * The Human-Agent profile's persistence (PROTOCOL.md §10): enrolled human DIDs, and the key that
 * tags the grants the authority prepares for a person to sign (prepared grants themselves are not
 * stored: the unauthenticated prepare step writes nothing). Plain SQL shared by SQLite and PostgreSQL,
 * mixed into the AuthorityStore by sql-store.ts. Every write is one statement.
 */
import type { SqlExecutor } from '../../service-kit/index.js';
import type { BundleScopeFields } from './types.js';

export interface EnrolledHuman {
  did: string;
  label: string;
  /** The Trust Bundles that list this person: a field set here must equal the bundle's; unset matches any. */
  scope: BundleScopeFields;
  /** The DID's public key (thumbprint members), as JSON text. */
  publicJwk: string;
  enrolledAt: string;
  enrolledBy: string;
  removedAt: string | null;
}

export interface HumanStore {
  /** Enrols a DID, or enrols again one that was removed; `created: false` when it is enrolled already (nothing changes). */
  enrolHuman(h: Omit<EnrolledHuman, 'removedAt'>): Promise<{ created: boolean }>;
  getHuman(did: string): Promise<EnrolledHuman | undefined>;
  listHumans(options?: { includeRemoved?: boolean }): Promise<EnrolledHuman[]>;
  /** Removes (keeps the record, for audit); undefined when unknown, `changed` only for the call that removed it. */
  removeHuman(did: string, at: string): Promise<{ removedAt: string; changed: boolean } | undefined>;
  /**
   * The key that tags prepared grants (HMAC, routes/humans.ts): made once per database by
   * whichever instance asks first, the same for every instance (a draft prepared by one is
   * accepted by another).
   */
  draftKey(make: () => string): Promise<string>;
  /** Ids of this DID's grants not yet revoked (its grants are signed under `keyId` = the DID URL). */
  unrevokedGrantIdsOf(didUrl: string): Promise<string[]>;
}

// Every AuthorityStore is also a HumanStore (sql-store.ts mixes createHumanStore in).
declare module './types.js' {
  interface AuthorityStore extends HumanStore {}
}

export const HUMAN_MIGRATION = {
  id: 'authority-humans-001',
  sql: `
    CREATE TABLE humans (
      did TEXT PRIMARY KEY,
      label TEXT NOT NULL,
      category TEXT,
      merchant TEXT,
      region TEXT,
      public_jwk TEXT NOT NULL,
      enrolled_at TEXT NOT NULL,
      enrolled_by TEXT NOT NULL,
      removed_at TEXT
    );
    CREATE TABLE authority_secrets (
      name TEXT PRIMARY KEY,
      value TEXT NOT NULL
    );
  `,
};

type HumanRow = {
  did: string; label: string; category: string | null; merchant: string | null; region: string | null; public_jwk: string;
  enrolled_at: string; enrolled_by: string; removed_at: string | null;
};

const humanFrom = (r: HumanRow): EnrolledHuman => {
  const scope: BundleScopeFields = {};
  if (r.category !== null) scope.category = r.category;
  if (r.merchant !== null) scope.merchant = r.merchant;
  if (r.region !== null) scope.region = r.region;
  return { did: r.did, label: r.label, scope, publicJwk: r.public_jwk, enrolledAt: r.enrolled_at, enrolledBy: r.enrolled_by, removedAt: r.removed_at };
};

/** The enrolled (not removed) humans, for a bundle being issued inside its transaction. */
export async function activeHumans(q: SqlExecutor): Promise<EnrolledHuman[]> {
  return (await q.all<HumanRow>('SELECT * FROM humans WHERE removed_at IS NULL ORDER BY did')).map(humanFrom);
}

export function createHumanStore(db: SqlExecutor): HumanStore {
  return {
    async enrolHuman(h) {
      // Insert, or revive a removed record; an enrolled one is left as it is (RETURNING is empty).
      const rows = await db.all(
        `INSERT INTO humans (did, label, category, merchant, region, public_jwk, enrolled_at, enrolled_by, removed_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL)
         ON CONFLICT (did) DO UPDATE SET label = excluded.label, category = excluded.category, merchant = excluded.merchant,
           region = excluded.region, enrolled_at = excluded.enrolled_at, enrolled_by = excluded.enrolled_by, removed_at = NULL
         WHERE humans.removed_at IS NOT NULL
         RETURNING did`,
        [h.did, h.label, h.scope.category ?? null, h.scope.merchant ?? null, h.scope.region ?? null, h.publicJwk, h.enrolledAt, h.enrolledBy],
      );
      return { created: rows.length === 1 };
    },
    async getHuman(did) {
      const r = await db.get<HumanRow>('SELECT * FROM humans WHERE did = ?', [did]);
      return r && humanFrom(r);
    },
    async listHumans(options = {}) {
      const rows = await db.all<HumanRow>(`SELECT * FROM humans ${options.includeRemoved ? '' : 'WHERE removed_at IS NULL'} ORDER BY did`);
      return rows.map(humanFrom);
    },
    async removeHuman(did, at) {
      const { changes } = await db.run('UPDATE humans SET removed_at = ? WHERE did = ? AND removed_at IS NULL', [at, did]);
      const r = await db.get<{ removed_at: string | null }>('SELECT removed_at FROM humans WHERE did = ?', [did]);
      return r && r.removed_at !== null ? { removedAt: r.removed_at, changed: changes === 1 } : undefined;
    },
    async draftKey(make) {
      // Insert-if-absent then read: two instances asking at once both read the one that won.
      await db.run('INSERT INTO authority_secrets (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING', ['human-draft-key', make()]);
      return (await db.get<{ value: string }>('SELECT value FROM authority_secrets WHERE name = ?', ['human-draft-key']))!.value;
    },
    async unrevokedGrantIdsOf(didUrl) {
      const rows = await db.all<{ grant_id: string }>('SELECT grant_id FROM grants WHERE key_id = ? AND revoked_at IS NULL ORDER BY grant_id', [didUrl]);
      return rows.map((r) => r.grant_id);
    },
  };
}
