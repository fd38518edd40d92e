/**
 * The gateway's tables. One SQL text serves SQLite and PostgreSQL: TEXT, INTEGER and BIGINT only,
 * times in epoch milliseconds, money in minor units as BIGINT. SQLite hands integers back as JS numbers, so
 * the gateway caps every amount at Number.MAX_SAFE_INTEGER (sessions/config.ts).
 * Payment states: reserved → paying → paid | released. 'paying' is written before the rail is
 * called, so a crash leaves a record that reconcile() settles with the rail.
 */
import type { Migration } from '../service-kit/index.js';
import { IDEMPOTENCY_MIGRATION } from './idempotency/store.js';

const initial = [
  `CREATE TABLE IF NOT EXISTS gw_owners (
        id TEXT PRIMARY KEY, label TEXT NOT NULL, key_hash TEXT NOT NULL, scopes TEXT NOT NULL,
        created_at BIGINT NOT NULL, revoked_at BIGINT)`,
  `CREATE TABLE IF NOT EXISTS gw_sessions (
        id TEXT PRIMARY KEY, owner_id TEXT NOT NULL, token_hash TEXT NOT NULL UNIQUE, label TEXT NOT NULL,
        currency TEXT NOT NULL, ceiling BIGINT NOT NULL, spent BIGINT NOT NULL DEFAULT 0,
        reserved BIGINT NOT NULL DEFAULT 0, state TEXT NOT NULL, expires_at BIGINT NOT NULL,
        created_at BIGINT NOT NULL, ended_at BIGINT, config TEXT NOT NULL, policy_hash TEXT NOT NULL,
        grant_id TEXT NOT NULL UNIQUE, grant_json TEXT NOT NULL, actor_key_pem TEXT NOT NULL,
        soft_limit BIGINT, continuation_nonce TEXT, max_per_hour INTEGER, max_per_merchant_day BIGINT,
        webhook_url TEXT, webhook_secret TEXT, thresholds TEXT NOT NULL DEFAULT '[]')`,
  `CREATE INDEX IF NOT EXISTS gw_sessions_owner ON gw_sessions (owner_id, created_at)`,
  `CREATE INDEX IF NOT EXISTS gw_sessions_expiry ON gw_sessions (state, expires_at)`,
  `CREATE TABLE IF NOT EXISTS gw_payments (
        id TEXT PRIMARY KEY, session_id TEXT NOT NULL, state TEXT NOT NULL, amount BIGINT NOT NULL,
        currency TEXT NOT NULL, merchant TEXT NOT NULL, address TEXT NOT NULL, purpose TEXT NOT NULL,
        rail TEXT NOT NULL, tx_ref TEXT, sba TEXT, created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL)`,
  `CREATE INDEX IF NOT EXISTS gw_payments_session ON gw_payments (session_id, created_at)`,
  `CREATE INDEX IF NOT EXISTS gw_payments_open ON gw_payments (state, updated_at)`,
  `CREATE TABLE IF NOT EXISTS gw_receipts (
        id TEXT PRIMARY KEY, session_id TEXT NOT NULL, payment_id TEXT NOT NULL UNIQUE,
        paid_at BIGINT NOT NULL, body TEXT NOT NULL)`,
  `CREATE INDEX IF NOT EXISTS gw_receipts_session ON gw_receipts (session_id, paid_at)`,
  // The ledger rail: one row per payment id, 'paid' or 'void'; the primary key
  // is what makes pay() idempotent and lets reconcile() void a payment that never reached it.
  `CREATE TABLE IF NOT EXISTS gw_ledger (
        payment_id TEXT PRIMARY KEY, status TEXT NOT NULL, tx_ref TEXT UNIQUE, address TEXT,
        amount BIGINT, currency TEXT, created_at BIGINT NOT NULL)`,
  `CREATE INDEX IF NOT EXISTS gw_ledger_address ON gw_ledger (address)`,
  `CREATE TABLE IF NOT EXISTS gw_charges (
        id TEXT PRIMARY KEY, amount BIGINT NOT NULL, currency TEXT NOT NULL, description TEXT NOT NULL,
        created_at BIGINT NOT NULL)`,
  `CREATE TABLE IF NOT EXISTS gw_keys (
        kid TEXT PRIMARY KEY, purpose TEXT NOT NULL, alg TEXT NOT NULL, private_pem TEXT NOT NULL,
        public_jwk TEXT NOT NULL, status TEXT NOT NULL, created_at BIGINT NOT NULL)`,
  // At most one active key per purpose, even with two instances starting at once.
  `CREATE UNIQUE INDEX IF NOT EXISTS gw_keys_active ON gw_keys (purpose) WHERE status = 'active'`,
  `CREATE TABLE IF NOT EXISTS gw_secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL)`,
];

// Epoch milliseconds / seconds of the migration's own transaction, per dialect.
const NOW_MS = {
  sqlite: `CAST(unixepoch('subsec') * 1000 AS INTEGER)`,
  postgres: `CAST(EXTRACT(EPOCH FROM now()) * 1000 AS BIGINT)`,
};
const NOW_S = { sqlite: `unixepoch()`, postgres: `CAST(EXTRACT(EPOCH FROM now()) AS BIGINT)` };
const perDialect = (f: (d: 'sqlite' | 'postgres') => string[]) => ({
  sqlite: f('sqlite').join(';\n'),
  postgres: f('postgres').join(';\n'),
});

/**
 * The Trust Bundle's sequence comes from the database (PROTOCOL.md §12): `gw_counters.bundle` is
 * raised in the transaction of every change a bundle reflects (a revocation, a key), and
 * `gw_bundles` keeps the one signed bundle of each sequence, so every instance serves the same.
 * The counter starts a day above the clock in seconds: bundles used to carry `floor(ms/1000)`,
 * and a verifier that stored one of those must not see the new sequences as a rollback (an
 * upgrade that keeps old instances serving for under a day stays ordered).
 */
const bundleSequence = (d: 'sqlite' | 'postgres') => [
  `CREATE TABLE gw_counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL)`,
  `INSERT INTO gw_counters (name, value) VALUES ('bundle', ${NOW_S[d]} + 86400)`,
  `CREATE TABLE gw_bundles (sequence BIGINT PRIMARY KEY, issued_at BIGINT NOT NULL, body TEXT NOT NULL)`,
];

/**
 * Owners and their API keys apart: an owner has any number of keys, sessions belong to the
 * owner. Today's rows move over keyed as before (the owner id is its first key's id), and
 * `gw_owners.revoked_at` becomes `disabled_at`. An owner disabled before this migration gets
 * what disabling now means: its live sessions are revoked (and the bundle sequence raised).
 */
const ownerKeys = (d: 'sqlite' | 'postgres') => [
  `CREATE TABLE gw_owner_keys (
        key_id TEXT PRIMARY KEY, owner_id TEXT NOT NULL, key_hash TEXT NOT NULL, scopes TEXT NOT NULL,
        created_at BIGINT NOT NULL, revoked_at BIGINT)`,
  `CREATE INDEX gw_owner_keys_owner ON gw_owner_keys (owner_id)`,
  `INSERT INTO gw_owner_keys (key_id, owner_id, key_hash, scopes, created_at, revoked_at)
        SELECT id, id, key_hash, scopes, created_at, revoked_at FROM gw_owners`,
  `ALTER TABLE gw_owners DROP COLUMN key_hash`,
  `ALTER TABLE gw_owners DROP COLUMN scopes`,
  `ALTER TABLE gw_owners RENAME COLUMN revoked_at TO disabled_at`,
  `ALTER TABLE gw_sessions ADD COLUMN revoked_by TEXT`,
  `UPDATE gw_counters SET value = value + 1 WHERE name = 'bundle' AND EXISTS (
        SELECT 1 FROM gw_sessions s JOIN gw_owners o ON o.id = s.owner_id
        WHERE o.disabled_at IS NOT NULL AND s.state IN ('active', 'paused') AND s.expires_at > ${NOW_MS[d]})`,
  `UPDATE gw_sessions SET state = 'revoked', ended_at = ${NOW_MS[d]}, continuation_nonce = NULL, revoked_by = 'admin'
        WHERE state IN ('active', 'paused') AND expires_at > ${NOW_MS[d]}
          AND owner_id IN (SELECT id FROM gw_owners WHERE disabled_at IS NOT NULL)`,
];

/**
 * Where a key's private half lives: 'database' (sealed in `private_pem`), or outside it
 * ('pkcs11', 'file': `private_pem` is empty, keys/ring.ts).
 */
const keyCustody = [`ALTER TABLE gw_keys ADD COLUMN custody TEXT NOT NULL DEFAULT 'database'`];

/**
 * Open payments only (reserved or paying), in reconcile's order (payments/store/payments.ts openPayments,
 * whose WHERE names these states literally, so both planners use it). The index it replaces held
 * every payment ever made, and each paid one cost an index entry that only reconcile's scan of
 * open rows ever read; a payment now leaves this index when it is paid or released.
 */
const openPaymentsIndex = [
  // Built first: the build holds writes back but lets reads through, and the drop's exclusive
  // lock then lasts only for the drop (both in the migration's one transaction). On a large
  // table, `CREATE INDEX CONCURRENTLY` of the same definition ahead of the upgrade leaves this
  // migration only the drop.
  'CREATE INDEX IF NOT EXISTS gw_payments_open_only ON gw_payments (updated_at, id) ' +
    `WHERE state IN ('reserved', 'paying')`,
  `DROP INDEX IF EXISTS gw_payments_open`,
];

/**
 * Receipts keep their SBA's grant apart, once per grant (payments/store/payments.ts ReceiptRow): the grant
 * was a third of every receipt row. Receipts stored before keep their grant inline (no
 * `grant_hash`); readers put a kept-apart grant back, so both read the same.
 */
/** Session keys prepared for a person's grant (PROTOCOL.md §10; sessions/human.ts). */
const HUMAN_SESSION_MIGRATION: Migration = {
  id: 'gateway-human-001',
  sql: `CREATE TABLE gw_human_session_reservations (
        session_id TEXT PRIMARY KEY, owner_id TEXT NOT NULL, kid TEXT NOT NULL UNIQUE, actor_key TEXT NOT NULL,
        created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL, used_at BIGINT)`,
};

const receiptGrants = [
  `CREATE TABLE IF NOT EXISTS gw_receipt_grants (hash TEXT PRIMARY KEY, body TEXT NOT NULL)`,
  `ALTER TABLE gw_receipts ADD COLUMN grant_hash TEXT`,
];

/**
 * Puts every kept-apart grant back into its receipt's body (the form before
 * `gateway-receipt-grants`), for going back to a gateway older than that migration, which reads a
 * body as the whole receipt: run it after stopping every newer instance and before starting an
 * older one (gateway/README.md "Upgrading"). Idempotent.
 */
export const RECEIPT_GRANTS_INLINE_SQL = {
  sqlite: `UPDATE gw_receipts SET body = json_set(body, '$.sba.grant',
    json((SELECT g.body FROM gw_receipt_grants g WHERE g.hash = gw_receipts.grant_hash))), grant_hash = NULL
     WHERE grant_hash IS NOT NULL AND EXISTS (SELECT 1 FROM gw_receipt_grants g WHERE g.hash = gw_receipts.grant_hash)`,
  postgres: `UPDATE gw_receipts r SET body = jsonb_set(r.body::jsonb, '{sba,grant}', g.body::jsonb)::text,
    grant_hash = NULL
     FROM gw_receipt_grants g WHERE g.hash = r.grant_hash`,
};

/**
 * Budget counters beyond a session's lifetime total (PROTOCOL.md §13, §14): each fixed window of
 * a session is a row made when its first payment comes (limits copied in, so a continuation can
 * raise one window alone); a child session names its parent, and `path` its whole chain of
 * ancestors (`/root/…/self/`), which a payment reserves on and a revocation stops below. A
 * payment keeps the window rows it was counted in (`counters`), so a release or a capture finds
 * them after the window ended. `paused_window`: the window whose soft limit paused the session.
 */
const budgetCounters = [
  `ALTER TABLE gw_sessions ADD COLUMN parent_id TEXT`,
  `ALTER TABLE gw_sessions ADD COLUMN path TEXT`,
  `ALTER TABLE gw_sessions ADD COLUMN depth INTEGER NOT NULL DEFAULT 0`,
  `ALTER TABLE gw_sessions ADD COLUMN windows_start BIGINT`,
  `ALTER TABLE gw_sessions ADD COLUMN paused_window TEXT`,
  `CREATE INDEX IF NOT EXISTS gw_sessions_parent ON gw_sessions (parent_id)`,
  `CREATE TABLE IF NOT EXISTS gw_session_windows (
        session_id TEXT NOT NULL, every TEXT NOT NULL, starts_at BIGINT NOT NULL, ends_at BIGINT NOT NULL,
        max_amount BIGINT NOT NULL, max_payments BIGINT, spent BIGINT NOT NULL DEFAULT 0,
        reserved BIGINT NOT NULL DEFAULT 0, payments BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (session_id, every, starts_at))`,
  `ALTER TABLE gw_payments ADD COLUMN counters TEXT`,
];

export const GATEWAY_MIGRATIONS: Migration[] = [
  { id: 'gateway-001-initial', sql: initial.join(';\n') },
  { id: 'gateway-002-bundle-sequence', ...perDialect(bundleSequence) },
  { id: 'gateway-003-owner-keys', ...perDialect(ownerKeys) },
  { id: 'gateway-keys-custody', sql: keyCustody.join(';\n') },
  IDEMPOTENCY_MIGRATION,
  HUMAN_SESSION_MIGRATION,
  { id: 'gateway-payments-open-only', sql: openPaymentsIndex.join(';\n') },
  { id: 'gateway-receipt-grants', sql: receiptGrants.join(';\n') },
  { id: 'gateway-budget-counters', sql: budgetCounters.join(';\n') },
];
