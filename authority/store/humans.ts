/**
 * The Human-Agent profile's persistence (PROTOCOL.md §10): enrolled human DIDs, and the key that
 * tags the grants the authority prepares for a person to sign (prepared grants themselves are not
 * stored: the unauthenticated prepare step writes nothing). Plain SQL shared by SQLite and PostgreSQL,
 * mixed into the AuthorityStore by sql-store.ts. Every write is one statement.
 */
import type { SqlDatabase, SqlExecutor } from '../../service-kit/index.js';
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

/**
 * What an enrolment did: enrolled, or nothing because the DID is enrolled already or a bundle it would join is full.
 */
export type Enrolment =
  | { created: true }
  | { created: false; reason: 'enrolled' }
  /** `listed`: the people the fullest bundle listing this person would hold, this person included. */
  | { created: false; reason: 'bundle_full'; listed: number };

export interface HumanStore {
  /**
   * Enrols a DID, or enrols again one that was removed; nothing changes when it is enrolled
   * already, or when a Trust Bundle that would list it would then hold more than
   * MAX_PEOPLE_PER_BUNDLE people. The check and the insert are one critical section across
   * instances, so two enrolments at once cannot both take the last place.
   */
  enrolHuman(h: Omit<EnrolledHuman, 'removedAt'>): Promise<Enrolment>;
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
  did: string;
  label: string;
  category: string | null;
  merchant: string | null;
  region: string | null;
  public_jwk: string;
  enrolled_at: string;
  enrolled_by: string;
  removed_at: string | null;
};

const humanFrom = (r: HumanRow): EnrolledHuman => {
  const scope: BundleScopeFields = {};
  if (r.category !== null) scope.category = r.category;
  if (r.merchant !== null) scope.merchant = r.merchant;
  if (r.region !== null) scope.region = r.region;
  return {
    did: r.did,
    label: r.label,
    scope,
    publicJwk: r.public_jwk,
    enrolledAt: r.enrolled_at,
    enrolledBy: r.enrolled_by,
    removedAt: r.removed_at,
  };
};

/** The enrolled (not removed) humans, for a bundle being issued inside its transaction. */
export async function activeHumans(q: SqlExecutor): Promise<EnrolledHuman[]> {
  return (await q.all<HumanRow>('SELECT * FROM humans WHERE removed_at IS NULL ORDER BY did')).map(humanFrom);
}

/**
 * A Trust Bundle lists at most 256 issuers (the bundle's shape, src/artifacts/bundle.ts): the
 * authority itself, and at most this many enrolled people.
 */
export const MAX_PEOPLE_PER_BUNDLE = 255;

const SCOPE_FIELDS = ['category', 'merchant', 'region'] as const;
type ScopeField = (typeof SCOPE_FIELDS)[number];

/**
 * The largest number of `humans` one bundle can list, over every value of the scope fields `free` (the others fixed).
 */
function fullest(humans: readonly EnrolledHuman[], free: readonly ScopeField[]): number {
  if (free.length === 0) return humans.length;
  if (free.length === 1) {
    const f = free[0]!;
    const byValue = new Map<string, number>();
    let unset = 0;
    for (const h of humans) {
      const v = h.scope[f];
      if (v === undefined) unset++;
      else byValue.set(v, (byValue.get(v) ?? 0) + 1);
    }
    return unset + Math.max(0, ...byValue.values());
  }
  if (free.length === 2) {
    // Listed by (v, w): those setting neither field, those setting only f to v, only g to w, and
    // both to (v, w). The best pair is the two best single values, or a pair someone set together.
    const [f, g] = free as [ScopeField, ScopeField];
    const onlyF = new Map<string, number>();
    const onlyG = new Map<string, number>();
    const both = new Map<string, { v: string; w: string; n: number }>();
    let neither = 0;
    for (const h of humans) {
      const v = h.scope[f];
      const w = h.scope[g];
      if (v === undefined && w === undefined) neither++;
      else if (w === undefined) onlyF.set(v!, (onlyF.get(v!) ?? 0) + 1);
      else if (v === undefined) onlyG.set(w, (onlyG.get(w) ?? 0) + 1);
      else {
        const key = JSON.stringify([v, w]);
        const e = both.get(key) ?? { v, w, n: 0 };
        e.n++;
        both.set(key, e);
      }
    }
    let best = Math.max(0, ...onlyF.values()) + Math.max(0, ...onlyG.values());
    for (const { v, w, n } of both.values()) best = Math.max(best, (onlyF.get(v) ?? 0) + (onlyG.get(w) ?? 0) + n);
    return neither + best;
  }
  // Three free fields: each value of the first (a value nobody set lists no more than any set one).
  const [f, ...rest] = free as [ScopeField, ...ScopeField[]];
  const values = new Set(humans.map((h) => h.scope[f]).filter((v): v is string => v !== undefined));
  if (values.size === 0) return fullest(humans, rest);
  let best = 0;
  for (const v of values)
    best = Math.max(
      best,
      fullest(
        humans.filter((h) => h.scope[f] === undefined || h.scope[f] === v),
        rest,
      ),
    );
  return best;
}

/**
 * How many people the fullest Trust Bundle that lists a person of `scope` would hold with that
 * person enrolled among `others` (a bundle lists a person when each scope field the person set
 * equals the bundle's; routes/humans.ts humanIssuers): `scope`'s fields are the bundle's, the
 * fields it leaves unset take whatever values list the most people.
 */
export function fullestBundleWith(others: readonly EnrolledHuman[], scope: BundleScopeFields): number {
  const fixed = SCOPE_FIELDS.filter((f) => scope[f] !== undefined);
  const listing = others.filter((h) => fixed.every((f) => h.scope[f] === undefined || h.scope[f] === scope[f]));
  return (
    1 +
    fullest(
      listing,
      SCOPE_FIELDS.filter((f) => scope[f] === undefined),
    )
  );
}

/**
 * Held while an enrolment counts the people a bundle would list and inserts (PostgreSQL advisory lock; SQLite's writer
 * lock).
 */
const ENROL_LOCK = 'ctl_humans_enrol';

export function createHumanStore(db: SqlDatabase): HumanStore {
  return {
    enrolHuman: (h) =>
      db.tx(
        async (q): Promise<Enrolment> => {
          const current = await q.get<{ removed_at: string | null }>('SELECT removed_at FROM humans WHERE did = ?', [
            h.did,
          ]);
          if (current && current.removed_at === null) return { created: false, reason: 'enrolled' };
          const listed = fullestBundleWith(await activeHumans(q), h.scope);
          if (listed > MAX_PEOPLE_PER_BUNDLE) return { created: false, reason: 'bundle_full', listed };
          // Insert, or revive a removed record; an enrolled one is left as it is (RETURNING is empty).
          const rows = await q.all(
            `INSERT INTO humans (did, label, category, merchant, region, public_jwk, enrolled_at, enrolled_by,
              removed_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL)
         ON CONFLICT (did) DO UPDATE SET label = excluded.label, category = excluded.category,
           merchant = excluded.merchant,
           region = excluded.region, enrolled_at = excluded.enrolled_at, enrolled_by = excluded.enrolled_by,
           removed_at = NULL
         WHERE humans.removed_at IS NOT NULL
         RETURNING did`,
            [
              h.did,
              h.label,
              h.scope.category ?? null,
              h.scope.merchant ?? null,
              h.scope.region ?? null,
              h.publicJwk,
              h.enrolledAt,
              h.enrolledBy,
            ],
          );
          return rows.length === 1 ? { created: true } : { created: false, reason: 'enrolled' };
        },
        { lock: ENROL_LOCK },
      ),
    async getHuman(did) {
      const r = await db.get<HumanRow>('SELECT * FROM humans WHERE did = ?', [did]);
      return r && humanFrom(r);
    },
    async listHumans(options = {}) {
      const rows = await db.all<HumanRow>(
        `SELECT * FROM humans ${options.includeRemoved ? '' : 'WHERE removed_at IS NULL'} ORDER BY did`,
      );
      return rows.map(humanFrom);
    },
    async removeHuman(did, at) {
      const { changes } = await db.run('UPDATE humans SET removed_at = ? WHERE did = ? AND removed_at IS NULL', [
        at,
        did,
      ]);
      const r = await db.get<{ removed_at: string | null }>('SELECT removed_at FROM humans WHERE did = ?', [did]);
      return r && r.removed_at !== null ? { removedAt: r.removed_at, changed: changes === 1 } : undefined;
    },
    async draftKey(make) {
      // Insert-if-absent then read: two instances asking at once both read the one that won.
      await db.run('INSERT INTO authority_secrets (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING', [
        'human-draft-key',
        make(),
      ]);
      return (await db.get<{ value: string }>('SELECT value FROM authority_secrets WHERE name = ?', [
        'human-draft-key',
      ]))!.value;
    },
    async unrevokedGrantIdsOf(didUrl) {
      const rows = await db.all<{ grant_id: string }>(
        'SELECT grant_id FROM grants WHERE key_id = ? AND revoked_at IS NULL ORDER BY grant_id',
        [didUrl],
      );
      return rows.map((r) => r.grant_id);
    },
  };
}
