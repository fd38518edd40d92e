/** What every route module receives from `createAuthorityApp`. */
import type { Middleware } from 'koa';
import type { Authenticate, Logger, WebhookOutbox } from '../../service-kit/index.js';
import type { AuditTrail } from '../audit-trail.js';
import type { KeyRing } from '../keys.js';
import type { TrustRoot } from '../trust-root.js';
import type { AuthorityStore } from '../store/types.js';
import type { AuthorityMetrics } from '../business-metrics.js';

export interface RouteDeps {
  store: AuthorityStore;
  keys: KeyRing;
  /** The root chain and the key that signs bundles under its newest version (PROTOCOL.md §11). */
  trustRoot: TrustRoot;
  audit: AuditTrail;
  /** The audit webhooks' outbox (dead letters are redelivered through it). */
  outbox?: WebhookOutbox;
  issuer: string;
  revocationBaseUrl: string;
  now: () => number;
  authenticate: Authenticate;
  /** `jsonBody` bound to the SDK's strict parser and the size limit. */
  body: Middleware;
  logger: Logger;
  /** Longest bundle lifetime accepted at POST /trust-bundles. */
  maxBundleTtlMs: number;
  /** Business counters (business-metrics.ts). */
  counters: AuthorityMetrics;
}

/** The actor recorded in the audit log for this request. */
export const actorOf = (state: { principal?: { keyId: string } }) => state.principal?.keyId ?? 'anonymous';

/** The scopes an API key may carry. */
export const SCOPES = ['policies:write', 'grants:write', 'grants:revoke', 'bundles:write', 'admin'] as const;
