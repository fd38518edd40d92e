/**
 * AuthorityStore over service-kit's SqlDatabase. The SQL is portable between SQLite (≥ 3.35)
 * and PostgreSQL: upserts and counters use `INSERT … ON CONFLICT … RETURNING`, so each is one
 * atomic statement; multi-statement changes run in `db.tx` under a named lock. Each concern is
 * its own module (policies, grants, revocations, API keys, signing keys, bundles, humans,
 * delegations, the root chain); this one composes them over one database.
 */
import {
  createAuditLog,
  createSqlDispatchLog,
  createWebhookOutbox,
  type SqlDatabase,
} from '../../service-kit/index.js';
import { createTrustRootStore } from './trust-root-store.js';
import { createHumanStore } from './humans.js';
import { createDelegationStore } from './delegations.js';
import { createPolicyStore } from './policies.js';
import { createGrantStore } from './grants.js';
import { createGrantChanges, createRevocationStore } from './revocations.js';
import { createApiKeyStore } from './api-keys.js';
import { createSigningKeyStore } from './signing-keys.js';
import { createBundleStore } from './bundles.js';
import type { AuthorityStore } from './types.js';

export interface SqlAuthorityStoreOptions {
  /** Most grants whose revocation status is cached in this process (default 10 000; 0 turns the cache off). */
  revocationCacheSize?: number;
}

/**
 * @example const store = createSqlAuthorityStore(await openDatabase(url)); (after migrate(db, AUTHORITY_MIGRATIONS))
 */
export function createSqlAuthorityStore(db: SqlDatabase, options: SqlAuthorityStoreOptions = {}): AuthorityStore {
  // One cache per store, shared by the grant writes that invalidate it and the revocation reads.
  const { cache, subscription } = createGrantChanges(db, options.revocationCacheSize ?? 10_000);
  return {
    dialect: db.dialect,
    description: db.description,
    pgPool: db.pgPool,
    db,
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
    ...createPolicyStore(db),
    ...createGrantStore(db, cache),
    ...createRevocationStore(db, cache),
    ...createApiKeyStore(db),
    ...createSigningKeyStore(db),
    ...createBundleStore(db),
  };
}
