/**
 * AuthorityStore over service-kit's SqlDatabase. The SQL is portable between SQLite (≥ 3.35)
 * and PostgreSQL: upserts and counters use `INSERT … ON CONFLICT … RETURNING`, so each is one
 * atomic statement; multi-statement changes run in `db.tx` under a named lock.
 */
import { randomUUID } from 'node:crypto';
import {
  changeWith,
  createAuditLog,
  createSqlDispatchLog,
  createWebhookOutbox,
  type SqlDatabase,
  type SqlExecutor,
  type TxEffect,
} from '../../service-kit/index.js';
import { createTrustRootStore } from './trust-root-store.js';
import { createRevocationCache, type CachedStatus, type RevocationCache } from './revocation-cache.js';
import { activeHumans, createHumanStore } from './humans.js';
import { createDelegationStore, REVOKED_DELEGATIONS_SQL } from './delegations.js';
import type {
  ApiKeyRow,
  AuthorityStore,
  BundleRecord,
  BundleScopeFields,
  GrantRecord,
  KeyPurposeName,
  PublishedKeyRow,
  SigningKeyRow,
  StoredGrant,
} from './types.js';

type GrantRow = {
  grant_id: string;
  policy_hash: string;
  key_id: string;
  grant_json: string;
  issued_at: string;
  expires_at_ms: number | string;
  created_by: string;
  revoked_at: string | null;
  revoked_by: string | null;
  revoke_reason: string | null;
  deleted_at: string | null;
};
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
type ApiRow = {
  key_id: string;
  hash: string;
  scopes: string;
  label: string;
  created_at: string;
  created_by: string;
  revoked_at: string | null;
};
type BundleRow = {
  bundle_id: string;
  scope_key: string;
  category: string | null;
  merchant: string | null;
  region: string | null;
  sequence: number | string;
  issued_at: string;
  expires_at_ms: number | string;
  bundle_json: string;
};

const grantFrom = (r: GrantRow): StoredGrant => ({
  grantId: r.grant_id,
  policyHash: r.policy_hash,
  keyId: r.key_id,
  grant: r.grant_json,
  issuedAt: r.issued_at,
  expiresAtMs: Number(r.expires_at_ms),
  createdBy: r.created_by,
  revokedAt: r.revoked_at,
  revokedBy: r.revoked_by,
  revokeReason: r.revoke_reason,
  deletedAt: r.deleted_at,
});
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
const apiFrom = (r: ApiRow): ApiKeyRow => ({
  keyId: r.key_id,
  hash: r.hash,
  scopes: JSON.parse(r.scopes) as string[],
  label: r.label,
  createdAt: r.created_at,
  createdBy: r.created_by,
  revokedAt: r.revoked_at,
});
const bundleFrom = (r: BundleRow): BundleRecord => {
  const scope: BundleScopeFields = {};
  if (r.category !== null) scope.category = r.category;
  if (r.merchant !== null) scope.merchant = r.merchant;
  if (r.region !== null) scope.region = r.region;
  return {
    bundleId: r.bundle_id,
    scopeKey: r.scope_key,
    scope,
    sequence: Number(r.sequence),
    issuedAt: r.issued_at,
    expiresAtMs: Number(r.expires_at_ms),
    bundle: r.bundle_json,
  };
};

const KEY_LOCK = 'ctl_authority_signing_keys';

/**
 * PostgreSQL channel of grant changes (revocation, insert), payload `{"g": grantId, "t": token}`.
 * Notifications are database-wide: another schema's authority on the same database only causes
 * harmless extra invalidations.
 */
export const GRANT_CHANNEL = 'ctl_authority_grants';
/** Longest wait for a revocation's own notification to come back before answering (then the cache is cleared). */
const ECHO_TIMEOUT_MS = 2000;

export interface SqlAuthorityStoreOptions {
  /** Most grants whose revocation status is cached in this process (default 10 000; 0 turns the cache off). */
  revocationCacheSize?: number;
}

/**
 * Keeps `cache` in step with every process's writes through LISTEN. Returns the subscription,
 * or undefined when the database cannot listen (the cache then never holds a negative answer).
 */
function followGrantChanges(db: SqlDatabase, cache: RevocationCache) {
  return db.listen?.(GRANT_CHANNEL, {
    notify(payload) {
      let n: { g?: unknown; t?: unknown };
      try {
        n = JSON.parse(payload) as typeof n;
      } catch {
        n = {};
      }
      if (typeof n.g !== 'string') return cache.setLive(cache.live); // unreadable: drop everything
      cache.invalidate(n.g);
      if (typeof n.t === 'string') cache.echo(n.t);
    },
    state: (live) => cache.setLive(live),
  });
}

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

/**
 * How long a revoked grant stays in bundles after it expires: a verifier may run with a clock
 * tolerance (PROTOCOL.md §1 `clockToleranceMs`) or a slow clock, and would accept an expired grant
 * inside it; a day covers any sane tolerance while keeping bundles from growing without bound.
 */
export const REVOKED_AFTER_EXPIRY_MS = 86_400_000;

async function revokedGrantIds(q: SqlExecutor, nowMs: number): Promise<string[]> {
  const rows = await q.all<{ grant_id: string }>(
    // Revoked delegations beside revoked grants (PROTOCOL.md §14), each until a day past its expiry.
    `SELECT grant_id FROM grants WHERE revoked_at IS NOT NULL AND expires_at_ms > ?
     UNION ${REVOKED_DELEGATIONS_SQL} ORDER BY grant_id`,
    [nowMs - REVOKED_AFTER_EXPIRY_MS, nowMs - REVOKED_AFTER_EXPIRY_MS],
  );
  return rows.map((r) => r.grant_id);
}

async function signingKeys(q: SqlExecutor): Promise<PublishedKeyRow[]> {
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

async function nextSequence(q: SqlExecutor, scopeKey: string): Promise<number> {
  const r = await q.get<{ seq: number | string }>(
    `INSERT INTO bundle_sequences (scope_key, seq) VALUES (?, 1)
     ON CONFLICT (scope_key) DO UPDATE SET seq = bundle_sequences.seq + 1 RETURNING seq`,
    [scopeKey],
  );
  return Number(r!.seq);
}

async function insertBundle(q: SqlExecutor, b: BundleRecord): Promise<void> {
  await q.run(
    `INSERT INTO bundles (bundle_id, scope_key, category, merchant, region, sequence, issued_at, expires_at_ms,
      bundle_json)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      b.bundleId,
      b.scopeKey,
      b.scope.category ?? null,
      b.scope.merchant ?? null,
      b.scope.region ?? null,
      b.sequence,
      b.issuedAt,
      b.expiresAtMs,
      b.bundle,
    ],
  );
}

/**
 * @example const store = createSqlAuthorityStore(await openDatabase(url)); (after migrate(db, AUTHORITY_MIGRATIONS))
 */
export function createSqlAuthorityStore(db: SqlDatabase, options: SqlAuthorityStoreOptions = {}): AuthorityStore {
  const postgres = db.dialect === 'postgres';
  // SQLite: one process per database file, so the store's own writes are every write (live from
  // the start). PostgreSQL: live only while the LISTEN connection is (until then, reads go through).
  const cache = createRevocationCache({ maxEntries: options.revocationCacheSize ?? 10_000, live: !postgres });
  const subscription = postgres ? followGrantChanges(db, cache) : undefined;
  /** NOTIFY statement, sent inside the writing transaction: delivered at its commit, never without it. */
  const notify = (q: SqlExecutor, grantId: string, token: string) =>
    q.get('SELECT pg_notify(?, ?) AS sent', [GRANT_CHANNEL, JSON.stringify({ g: grantId, t: token })]);
  const loadStatus = async (grantId: string): Promise<CachedStatus> => {
    const r = await db.get<{ revoked_at: string | null }>('SELECT revoked_at FROM grants WHERE grant_id = ?', [
      grantId,
    ]);
    if (!r) return null;
    return r.revoked_at === null ? { revoked: false } : { revoked: true, revokedAt: r.revoked_at };
  };

  return {
    dialect: db.dialect,
    description: db.description,
    pgPool: db.pgPool,
    revocationCache: cache,
    ping: () => db.ping(),
    ...createHumanStore(db),
    ...createDelegationStore(db),
    async close() {
      await subscription?.close();
      await db.close();
    },
    audit: createAuditLog(db, 'audit_log'),
    dispatchLog: createSqlDispatchLog(db, 'webhook_dispatches'),
    ...createTrustRootStore(db),
    webhookOutbox: (options) => createWebhookOutbox({ ...options, db, table: 'webhook_dispatches' }),
    db,

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

    async putGrant(g: GrantRecord, effect) {
      const insert =
        'INSERT INTO grants (grant_id, policy_hash, key_id, grant_json, issued_at, expires_at_ms, ' +
        'created_by) VALUES (?, ?, ?, ?, ?, ?, ?)';
      const values = [g.grantId, g.policyHash, g.keyId, g.grant, g.issuedAt, g.expiresAtMs, g.createdBy];
      // A process may hold "unknown grant" for this id: the insert tells every process, in the
      // same statement (one round trip, notification at its commit). Not waited for: a stale
      // "unknown" refuses a good grant for a moment, it never accepts a revoked one.
      await changeWith(
        db,
        async (q) => {
          if (postgres) {
            await q.get(`WITH g AS (${insert} RETURNING grant_id) SELECT pg_notify(?, ?) AS sent FROM g`, [
              ...values,
              GRANT_CHANNEL,
              JSON.stringify({ g: g.grantId }),
            ]);
          } else {
            await q.run(insert, values);
          }
        },
        effect,
      );
      cache.invalidate(g.grantId);
    },
    async getGrant(grantId, options = {}) {
      const r = await db.get<GrantRow>('SELECT * FROM grants WHERE grant_id = ?', [grantId]);
      if (!r || (r.deleted_at !== null && !options.includeDeleted)) return undefined;
      return grantFrom(r);
    },
    async listGrants(options = {}) {
      const limit = Math.min(Math.max(1, options.limit ?? 100), 1000);
      const rows = await db.all<GrantRow>(
        `SELECT * FROM grants WHERE grant_id > ? ${options.includeDeleted ? '' : 'AND deleted_at IS NULL'} ` +
          'ORDER BY grant_id LIMIT ?',
        [options.afterGrantId ?? '', limit],
      );
      return rows.map(grantFrom);
    },
    async revokeGrant(grantId, by, effect) {
      // Registered before the commit, so the echo cannot be missed.
      const token = randomUUID();
      const echo = cache.expectEcho(token);
      let result: { revokedAt: string; changed: boolean } | undefined;
      let after = undefined as (() => void) | undefined;
      try {
        result = await db.tx(async (q) => {
          // One conditional UPDATE: the first revocation wins and later ones change nothing.
          const { changes } = await q.run(
            'UPDATE grants SET revoked_at = ?, revoked_by = ?, revoke_reason = ? WHERE grant_id ' +
              '= ? AND revoked_at IS NULL',
            [by.at, by.actor, by.reason ?? null, grantId],
          );
          const r = await q.get<{ revoked_at: string | null }>('SELECT revoked_at FROM grants WHERE grant_id = ?', [
            grantId,
          ]);
          if (!r || r.revoked_at === null) return undefined;
          // Also when unchanged: this caller is told "revoked", so every process must know it.
          if (postgres) await notify(q, grantId, token);
          const out = { revokedAt: r.revoked_at, changed: changes === 1 };
          after = (effect && (await effect(q, out))) || undefined;
          return out;
        });
      } catch (e) {
        echo.cancel();
        throw e;
      }
      cache.invalidate(grantId);
      if (after) after();
      // Answer only once the notification has come back through this process's listener: every
      // store of this process has dropped the entry by then, and PostgreSQL has signalled every
      // other listener (they are a socket read away from dropping it).
      if (result && postgres) await echo.wait(ECHO_TIMEOUT_MS);
      else echo.cancel();
      return result;
    },
    async revocationStatus(grantId) {
      // The hot path: a cache hit answers without touching the database (revocation-cache.ts).
      const hit = cache.get(grantId);
      if (hit !== undefined) return hit ?? undefined;
      return (await cache.read(grantId, () => loadStatus(grantId))) ?? undefined;
    },
    listRevokedGrantIds: (nowMs) => revokedGrantIds(db, nowMs),
    softDeleteGrant(grantId, at, effect) {
      return changeWith(
        db,
        async (q) => {
          const { changes } = await q.run(
            'UPDATE grants SET deleted_at = ? WHERE grant_id = ? AND deleted_at IS NULL',
            [at, grantId],
          );
          return changes === 1;
        },
        effect,
      );
    },

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

    nextBundleSequence: (scopeKey) => nextSequence(db, scopeKey),
    putBundle: (b) => insertBundle(db, b),
    issueBundle(scopeKey, nowMs, sign, effect) {
      // PostgreSQL: an advisory lock per scope, held to commit, so the reads below see every
      // change committed before the previous bundle of this scope was stored. SQLite: BEGIN
      // IMMEDIATE holds the only writer lock, and this process's other statements wait for the
      // transaction (service-kit/database.ts). `sign` is pure (no store access): an Ed25519 or
      // P-256 signature, so the lock is held for a few statements and one signature.
      return changeWith(
        db,
        async (q) => {
          const sequence = await nextSequence(q, scopeKey);
          const revoked = await revokedGrantIds(q, nowMs);
          const keys = await signingKeys(q);
          const humans = await activeHumans(q);
          const signed = await sign({ sequence, revokedGrantIds: revoked, signingKeys: keys, humans });
          const record: BundleRecord = { ...signed, scopeKey, sequence };
          await insertBundle(q, record);
          return record;
        },
        effect,
        { lock: `ctl_bundle:${scopeKey}` },
      );
    },
    async latestBundles(filter, nowMs) {
      const where: string[] = [];
      const params: unknown[] = [];
      for (const f of ['category', 'merchant', 'region'] as const) {
        if (filter[f] !== undefined) {
          where.push(`(b.${f} IS NULL OR b.${f} = ?)`);
          params.push(filter[f]);
        }
      }
      params.push(nowMs);
      const rows = await db.all<BundleRow>(
        `SELECT b.* FROM bundles b
         JOIN (SELECT scope_key, MAX(sequence) AS seq FROM bundles GROUP BY scope_key) newest
           ON newest.scope_key = b.scope_key AND newest.seq = b.sequence
         WHERE ${where.length ? where.join(' AND ') + ' AND ' : ''}b.expires_at_ms > ?
         ORDER BY b.scope_key`,
        params,
      );
      return rows.map(bundleFrom);
    },
  };
}
