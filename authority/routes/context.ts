/** What every route module receives from `createAuthorityApp`. */
import type { Middleware } from 'koa';
import type { Authenticate, Logger } from '../../service-kit/index.js';
import type { AuditTrail } from '../audit-trail.js';
import type { KeyRing } from '../keys.js';
import type { AuthorityStore } from '../store/types.js';

export interface RouteDeps {
  store: AuthorityStore;
  keys: KeyRing;
  audit: AuditTrail;
  issuer: string;
  revocationBaseUrl: string;
  now: () => number;
  authenticate: Authenticate;
  /** `jsonBody` bound to the SDK's strict parser and the size limit. */
  body: Middleware;
  logger: Logger;
  /** Longest bundle lifetime accepted at POST /trust-bundles. */
  maxBundleTtlMs: number;
}

/** The actor recorded in the audit log for this request. */
export const actorOf = (state: { principal?: { keyId: string } }) => state.principal?.keyId ?? 'anonymous';

/** The scopes an API key may carry (issue 3 §2). */
export const SCOPES = ['policies:write', 'grants:write', 'grants:revoke', 'bundles:write', 'admin'] as const;
