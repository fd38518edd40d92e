/**
 * The authority's schema. The same SQL runs on SQLite and PostgreSQL: times that are compared
 * are BIGINT milliseconds (ISO text with varying fractions does not sort), JSON is TEXT.
 */
import {
  auditLogMigration,
  dispatchLogMigration,
  webhookOutboxMigration,
  type Migration,
} from '../../service-kit/index.js';
import { chainOutboxMigration } from '../../service-kit/anchor/store.js';
import { HUMAN_MIGRATION } from './humans.js';
import { DELEGATION_BY_HASH_MIGRATION, DELEGATION_MIGRATION } from './delegations.js';
import { serviceLogMigrations } from '../../service-kit/tlog/service.js';

export const AUTHORITY_MIGRATIONS: readonly Migration[] = [
  {
    id: 'authority-001-initial',
    sql: `
      CREATE TABLE policies (
        policy_hash TEXT PRIMARY KEY,
        document TEXT NOT NULL,
        stored_at TEXT NOT NULL
      );
      CREATE TABLE grants (
        grant_id TEXT PRIMARY KEY,
        policy_hash TEXT NOT NULL REFERENCES policies (policy_hash),
        key_id TEXT NOT NULL,
        grant_json TEXT NOT NULL,
        issued_at TEXT NOT NULL,
        expires_at_ms BIGINT NOT NULL,
        created_by TEXT NOT NULL,
        revoked_at TEXT,
        revoked_by TEXT,
        revoke_reason TEXT,
        deleted_at TEXT
      );
      CREATE INDEX grants_key_expiry ON grants (key_id, expires_at_ms);
      CREATE INDEX grants_revoked_expiry ON grants (expires_at_ms) WHERE revoked_at IS NOT NULL;
      CREATE TABLE api_keys (
        key_id TEXT PRIMARY KEY,
        hash TEXT NOT NULL,
        scopes TEXT NOT NULL,
        label TEXT NOT NULL,
        created_at TEXT NOT NULL,
        created_by TEXT NOT NULL,
        revoked_at TEXT
      );
      CREATE TABLE signing_keys (
        kid TEXT PRIMARY KEY,
        purpose TEXT NOT NULL,
        alg TEXT NOT NULL,
        status TEXT NOT NULL,
        public_jwk TEXT NOT NULL,
        public_pem TEXT NOT NULL,
        private_pem TEXT,
        source TEXT NOT NULL,
        created_at TEXT NOT NULL,
        retired_at TEXT
      );
      CREATE TABLE bundle_sequences (
        scope_key TEXT PRIMARY KEY,
        seq BIGINT NOT NULL
      );
      CREATE TABLE bundles (
        bundle_id TEXT PRIMARY KEY,
        scope_key TEXT NOT NULL,
        category TEXT,
        merchant TEXT,
        region TEXT,
        sequence BIGINT NOT NULL,
        issued_at TEXT NOT NULL,
        expires_at_ms BIGINT NOT NULL,
        bundle_json TEXT NOT NULL,
        UNIQUE (scope_key, sequence)
      );
    `,
  },
  auditLogMigration('audit_log'),
  dispatchLogMigration('webhook_dispatches'),
  {
    // The lease of a grant key from an instance's environment: last time an instance holding it
    // said so (ms). Published while held or while a grant it signed lives (keys.ts).
    id: 'authority-002-signing-key-lease',
    sql: 'ALTER TABLE signing_keys ADD COLUMN last_seen_ms BIGINT;',
  },
  {
    // The published root chain (PROTOCOL.md §11): one row per version from 2 up (version 1 is the
    // root key devices pin). Never updated or deleted: the chain only grows.
    id: 'authority-003-trust-root',
    sql: `
      CREATE TABLE trust_root_statements (
        root_version BIGINT PRIMARY KEY,
        statement_json TEXT NOT NULL,
        published_at TEXT NOT NULL,
        published_by TEXT NOT NULL
      );
    `,
  },
  // Webhook deliveries become a durable outbox, drained by every instance (service-kit webhook-outbox.ts).
  webhookOutboxMigration('webhook_dispatches'),
  // Enrolled human DIDs and their grant drafts (PROTOCOL.md §10).
  HUMAN_MIGRATION,
  // Revoked delegations (PROTOCOL.md §14).
  DELEGATION_MIGRATION,
  DELEGATION_BY_HASH_MIGRATION,
  // The transparency log of grants, revocations and bundles (service-kit/tlog).
  ...serviceLogMigrations('au_log'),
  // Anchors of the audit chain and revocation tokens on ledgers (service-kit/anchor/).
  chainOutboxMigration('chain_outbox'),
];
