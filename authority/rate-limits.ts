/**
 * The authority's rate limits: per API key on every authenticated route (counted after the key
 * verifies, the bootstrap admin key excepted; in the authority's database on PostgreSQL, so
 * instances sharing it share each key's budget; in memory on SQLite, the one-instance case),
 * and per client address on every request (the only limit of the public routes: GET /revoke,
 * the JWKS, Trust Bundles). Revocation checks are the highest-volume traffic, answered from an
 * in-process cache: the address limit is generous and counted in each instance's memory, so it
 * adds no database write to that path.
 */
import type { Middleware } from 'koa';
import {
  createLimiter,
  limitAuthenticate,
  parseRateLimit,
  rateLimit,
  type Authenticate,
  type RateLimit,
  type RateLimitBackend,
} from '../service-kit/index.js';

export interface AuthorityRateLimits {
  /** Requests per API key (undefined: no limit). */
  key?: RateLimit;
  /** Requests per client address, per instance (undefined: no limit). */
  address?: RateLimit;
}

/**
 * 100 requests a second per key on average (an issuing backend granting a fleet, a bulk
 * revocation); 1000 a second per address, so a depot of terminals behind one NAT is not
 * refused while one runaway client is.
 */
export const DEFAULT_AUTHORITY_RATE_LIMITS: Readonly<Required<AuthorityRateLimits>> = {
  key: { points: 6000, seconds: 60 },
  address: { points: 60000, seconds: 60 },
};

/** The principal createApiKeyAuth gives the bootstrap key. */
const BOOTSTRAP_KEY_ID = 'bootstrap';

/** Probes and scrapes are never limited: an orchestrator must always see the truth. */
const UNLIMITED_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

/** `CTL_AUTHORITY_RATE_LIMIT_KEY`, `CTL_AUTHORITY_RATE_LIMIT_ADDRESS`: `N/Ss`, or `0` for none. */
export function authorityRateLimitsFromEnv(env: Record<string, string | undefined>): AuthorityRateLimits {
  return {
    key: parseRateLimit(
      env['CTL_AUTHORITY_RATE_LIMIT_KEY'],
      'CTL_AUTHORITY_RATE_LIMIT_KEY',
      DEFAULT_AUTHORITY_RATE_LIMITS.key,
    ),
    address: parseRateLimit(
      env['CTL_AUTHORITY_RATE_LIMIT_ADDRESS'],
      'CTL_AUTHORITY_RATE_LIMIT_ADDRESS',
      DEFAULT_AUTHORITY_RATE_LIMITS.address,
    ),
  };
}

/** The key check that spends the key's budget, and the middleware that spends the client address's. */
export function authorityRateLimits(
  backend: RateLimitBackend,
  limits: AuthorityRateLimits,
  authenticate: Authenticate,
): { authenticate: Authenticate; addresses: Middleware } {
  const keys = createLimiter(backend, limits.key, { name: 'au_key', what: 'API key' });
  const addresses = createLimiter(backend, limits.address, { name: 'au_address', what: 'client address', local: true });
  return {
    // The bootstrap CTL_ADMIN_API_KEY is the operator's break-glass credential and never
    // limited: revoking a compromised fleet's grants in bulk must not wait for a window.
    authenticate: limitAuthenticate(authenticate, keys, (p) => (p.keyId === BOOTSTRAP_KEY_ID ? undefined : p.keyId)),
    // Every request but the probes, with a key or not (an Authorization header, real or made
    // up, must not be a way around it). app.proxy is false: the address is the connection's
    // (behind a proxy, the proxy's).
    addresses: rateLimit(addresses, (ctx) =>
      UNLIMITED_PATHS.has(ctx.path) ? undefined : (ctx.socket.remoteAddress ?? 'unknown'),
    ),
  };
}
