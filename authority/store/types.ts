/**
 * The authority's persistence, one interface for SQLite and PostgreSQL. Every
 * write that must not race is one SQL statement or one transaction inside the implementation:
 * callers never read-then-write. Each change takes an optional `effect` (service-kit tx-effect.ts)
 * run inside its transaction: the audit entry that records the change, and its webhook
 * deliveries, commit with it or not at all.
 */
import type {
  AuditLog,
  DispatchLog,
  SqlDatabase,
  TxEffect,
  WebhookOutbox,
  WebhookOutboxOptions,
} from '../../service-kit/index.js';
import type { TrustRootStore } from './trust-root-store.js';

export interface StoredPolicy {
  policyHash: string;
  /** The policy document as received (JSON text). */
  document: string;
  storedAt: string;
}

export interface GrantRecord {
  grantId: string;
  policyHash: string;
  /** kid of the key that signed it: keeps a retired key published while this grant lives. */
  keyId: string;
  /** The signed PolicyGrant (JSON text). */
  grant: string;
  issuedAt: string;
  expiresAtMs: number;
  createdBy: string;
}

export interface StoredGrant extends GrantRecord {
  revokedAt: string | null;
  revokedBy: string | null;
  revokeReason: string | null;
  /** Soft delete: the record is kept (custody, audit), hidden from listings. */
  deletedAt: string | null;
}

export interface RevocationStatus {
  revoked: boolean;
  revokedAt?: string;
}

export interface ApiKeyRow {
  keyId: string;
  hash: string;
  scopes: string[];
  label: string;
  createdAt: string;
  createdBy: string;
  revokedAt: string | null;
}

export type KeyPurposeName = 'grant' | 'bundle';

export interface SigningKeyRow {
  kid: string;
  purpose: KeyPurposeName;
  alg: 'EdDSA' | 'ES256';
  status: 'active' | 'retired';
  /** Public JWK (thumbprint members) as JSON text. */
  publicJwk: string;
  publicPem: string;
  /** Only for keys this authority generated; keys from the environment are never stored. */
  privatePem: string | null;
  source: 'generated' | 'env';
  createdAt: string;
  retiredAt: string | null;
}

export interface PublishedKeyRow extends SigningKeyRow {
  /** Latest expiry (ms) of the grants this key signed, or null when none. */
  lastGrantExpiryMs: number | null;
  /** A key from an instance's environment: last time an instance holding it renewed its lease (ms). */
  lastSeenMs: number | null;
}

export interface BundleScopeFields {
  category?: string;
  merchant?: string;
  region?: string;
}

export interface BundleRecord {
  bundleId: string;
  scopeKey: string;
  scope: BundleScopeFields;
  sequence: number;
  issuedAt: string;
  expiresAtMs: number;
  /** The signed TrustBundle (JSON text). */
  bundle: string;
}

/** What `issueBundle` reads inside its transaction, for the bundle it signs. */
export interface BundleIssueInput {
  sequence: number;
  /** As listRevokedGrantIds(nowMs). */
  revokedGrantIds: string[];
  /** As listSigningKeys(). */
  signingKeys: PublishedKeyRow[];
  /** The enrolled humans (PROTOCOL.md §10), listed as issuers where their scope matches. */
  humans: import('./humans.js').EnrolledHuman[];
}

/** What `issueBundle`'s `sign` returns: the record to store, less what the store decided. */
export type SignedBundle = Omit<BundleRecord, 'scopeKey' | 'sequence'>;

export interface AuthorityStore extends TrustRootStore {
  readonly dialect: 'sqlite' | 'postgres';
  readonly description: string;
  /** PostgreSQL only: the store's pool, for the rate limits' counters (service-kit/service-limits.ts). */
  readonly pgPool?: SqlDatabase['pgPool'];
  /** The database itself: the transparency log's and the chain outbox's tables live beside the store's. */
  readonly db: SqlDatabase;
  ping(): Promise<boolean>;
  close(): Promise<void>;

  /** Stores a policy once; the same hash again returns the first `storedAt` and `created: false`. */
  putPolicy(
    policyHash: string,
    document: string,
    at: string,
    effect?: TxEffect<{ policyHash: string; storedAt: string; created: boolean }>,
  ): Promise<{ policyHash: string; storedAt: string; created: boolean }>;
  getPolicy(policyHash: string): Promise<StoredPolicy | undefined>;

  putGrant(record: GrantRecord, effect?: TxEffect<void>): Promise<void>;
  /** Soft-deleted grants are returned only with `includeDeleted`. */
  getGrant(grantId: string, options?: { includeDeleted?: boolean }): Promise<StoredGrant | undefined>;
  listGrants(options?: { afterGrantId?: string; limit?: number; includeDeleted?: boolean }): Promise<StoredGrant[]>;
  /**
   * Revokes at once; idempotent (the first `revokedAt` stays). undefined when the grant is
   * unknown. Resolves once every process's revocation cache has been told (PostgreSQL: NOTIFY in
   * the same transaction, answered after it came back to this process's listener).
   */
  revokeGrant(
    grantId: string,
    by: { at: string; actor: string; reason?: string },
    effect?: TxEffect<{ revokedAt: string; changed: boolean }>,
  ): Promise<{ revokedAt: string; changed: boolean } | undefined>;
  /**
   * The hot path of every wallet and merchant (spec §4.3 GET /revoke), answered from an
   * in-process cache kept in step with every process's writes (store/revocation-cache.ts), else
   * one indexed read. Deleted grants still answer.
   */
  revocationStatus(grantId: string): Promise<RevocationStatus | undefined>;
  /** State of that cache (tests, diagnostics): `live` while negative answers may be cached. */
  readonly revocationCache: { readonly live: boolean; readonly size: number };
  /** Ids of revoked grants that have not expired at `nowMs`, for Trust Bundles (PROTOCOL.md §4 revokedGrants). */
  listRevokedGrantIds(nowMs: number): Promise<string[]>;
  /** Marks a grant deleted (kept for custody and audit); false when unknown or already deleted. */
  softDeleteGrant(grantId: string, at: string, effect?: TxEffect<boolean>): Promise<boolean>;

  putApiKey(row: ApiKeyRow, effect?: TxEffect<void>): Promise<void>;
  getApiKey(keyId: string): Promise<ApiKeyRow | undefined>;
  listApiKeys(): Promise<ApiKeyRow[]>;
  /** Idempotent (the first revokedAt stays; `changed` only for the call that revoked); undefined when unknown. */
  revokeApiKey(
    keyId: string,
    at: string,
    effect?: TxEffect<{ revokedAt: string; changed: boolean }>,
  ): Promise<{ revokedAt: string; changed: boolean } | undefined>;

  /** Inserts a key unless its kid exists (two processes generating at once keep one). */
  putSigningKey(row: SigningKeyRow): Promise<boolean>;
  /**
   * Replaces a stored private key's text (sealing one stored in the clear) only if it is still `from`: false otherwise.
   */
  replacePrivatePem(kid: string, from: string, to: string): Promise<boolean>;
  getSigningKey(kid: string): Promise<SigningKeyRow | undefined>;
  /** The newest active key of `purpose` (of that `source` when given). */
  activeSigningKey(purpose: KeyPurposeName, source?: SigningKeyRow['source']): Promise<SigningKeyRow | undefined>;
  /** Every key with the latest expiry of what it signed and its lease, for JWKS and bundles. */
  listSigningKeys(): Promise<PublishedKeyRow[]>;
  /**
   * Makes `kid` the only active key of its purpose and source, retiring the others of that source,
   * in one transaction under a lock (so concurrent rotations leave exactly one active stored key,
   * and never touch a key an instance holds from its environment).
   */
  activateSigningKey(kid: string, purpose: KeyPurposeName, at: string, effect?: TxEffect<void>): Promise<void>;
  /**
   * An instance signs with `kid`, a key from its environment: the key is active and its lease
   * (`lastSeenMs`) is at least `atMs`. Other keys are untouched. false when no such env key.
   */
  holdSigningKey(kid: string, atMs: number): Promise<boolean>;
  /**
   * The active key of `purpose` (of that `source` when given); when there is none, `create()`
   * makes one and it is stored and activated, all under one lock (several processes starting at
   * once on one database end up with one key, not several). `created` says whether this call made it.
   */
  ensureActiveSigningKey(
    purpose: KeyPurposeName,
    create: () => Promise<SigningKeyRow>,
    source?: SigningKeyRow['source'],
  ): Promise<{ row: SigningKeyRow; created: boolean }>;

  /** The next sequence of a bundle scope: one atomic statement, strictly increasing (PROTOCOL.md §4). */
  nextBundleSequence(scopeKey: string): Promise<number>;
  putBundle(record: BundleRecord): Promise<void>;
  /**
   * Issues the next bundle of a scope as one unit, serialized per scope across processes: in one
   * transaction under the lock `ctl_bundle:<scopeKey>` it takes the sequence, reads the signing
   * keys and the revoked grants, calls `sign` and stores what it returns. So a higher sequence
   * always carries every revocation and key an older one of that scope carried. `sign` must not
   * use the store (SQLite: the connection is held by this transaction until it returns).
   */
  issueBundle(
    scopeKey: string,
    nowMs: number,
    sign: (input: BundleIssueInput) => Promise<SignedBundle>,
    effect?: TxEffect<BundleRecord>,
  ): Promise<BundleRecord>;
  /**
   * The newest bundle of each scope that matches: a given filter matches a bundle whose field
   * equals it or is unset; an absent filter matches anything. Expired bundles are left out.
   */
  latestBundles(filter: BundleScopeFields, nowMs: number): Promise<BundleRecord[]>;

  readonly audit: AuditLog;
  /** The webhook outbox read back (status, attempts, dead letters). */
  readonly dispatchLog: DispatchLog;
  /** The webhook outbox on this store's database (table `webhook_dispatches`). */
  webhookOutbox(options: Omit<WebhookOutboxOptions, 'db' | 'table'>): WebhookOutbox;
}
