/**
 * The gateway's tables. One SQL text serves SQLite and PostgreSQL: TEXT, INTEGER and BIGINT only,
 * times in epoch milliseconds, money in minor units as BIGINT. SQLite hands integers back as JS numbers, so
 * the gateway caps every amount at Number.MAX_SAFE_INTEGER (services/session-config.ts).
 * Payment states: reserved → paying → paid | released. 'paying' is written before the rail is
 * called, so a crash leaves a record that reconcile() settles with the rail (issue 4 §3).
 */
import type { Migration } from '../../service-kit/index.js';

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
      // The ledger rail (issue 4 §4): one row per payment id, 'paid' or 'void'; the primary key
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

export const GATEWAY_MIGRATIONS: Migration[] = [{ id: 'gateway-001-initial', sql: initial.join(';\n') }];
