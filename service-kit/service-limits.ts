/**
 * Each service's rate limits, in one place so both count the same way: the authority's and the
 * gateway's limit sets over service-kit's limiter (rate-limit.ts), their defaults and the
 * environment variables that set them.
 *
 * The authority: per API key on every authenticated route (counted after the key
 * verifies, the bootstrap admin key excepted; in the authority's database on PostgreSQL, so
 * instances sharing it share each key's budget; in memory on SQLite, the one-instance case),
 * and per client address on every request (the only limit of the public routes: GET /revoke,
 * the JWKS, Trust Bundles). Revocation checks are the highest-volume traffic, answered from an
 * in-process cache: the address limit is generous and counted in each instance's memory, so it
 * adds no database write to that path.
 *
 * The gateway (spec §8 "a per-owner rate limit is planned"): per budget owner on
 * the owner API, whichever of its keys is used (an owner's keys share one budget, so adding a
 * key never raises the limit; the operator's bootstrap admin key is not limited), and per
 * session on everything an agent calls with its token (`/proxy`, its continuation). Both count
 * only once the credential is known to be real, so a forged one never writes a counter nor
 * spends anyone's budget. `POST /charge` (merchant mode) takes no credential at all and writes a
 * row: it is limited per client address, as the authority limits its public routes. Counted in
 * the gateway's database on PostgreSQL, so instances sharing it share each budget; in memory on
 * SQLite (one instance).
 */
import { isIP } from 'node:net';
import type { Middleware } from 'koa';
import type { Authenticate, Principal } from './api-keys.js';
import {
  createLimiter,
  limitAuthenticate,
  parseRateLimit,
  rateLimit,
  type RateLimit,
  type RateLimitBackend,
} from './rate-limit.js';

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

export interface GatewayRateLimits {
  /** Owner API requests per owner (undefined: no limit). */
  owner?: RateLimit;
  /** Agent requests per session, counted once its token is found (undefined: no limit). */
  session?: RateLimit;
  /** `POST /charge` requests per client address (undefined: no limit). */
  charge?: RateLimit;
}

/**
 * A busy owner's automation (creating sessions for a fleet, polling receipts) stays well under
 * 100 requests a second; an agent paying per request under 20; a merchant's server asking for a
 * charge per sale under 20.
 */
export const DEFAULT_GATEWAY_RATE_LIMITS: Readonly<Required<GatewayRateLimits>> = {
  owner: { points: 6000, seconds: 60 },
  session: { points: 1200, seconds: 60 },
  charge: { points: 1200, seconds: 60 },
};

/**
 * `CTL_GATEWAY_RATE_LIMIT_OWNER`, `CTL_GATEWAY_RATE_LIMIT_SESSION`, `CTL_GATEWAY_RATE_LIMIT_CHARGE`: `N/Ss`, or `0` for
 * none.
 */
export function gatewayRateLimitsFromEnv(env: Record<string, string | undefined>): GatewayRateLimits {
  return {
    owner: parseRateLimit(
      env.CTL_GATEWAY_RATE_LIMIT_OWNER,
      'CTL_GATEWAY_RATE_LIMIT_OWNER',
      DEFAULT_GATEWAY_RATE_LIMITS.owner,
    ),
    session: parseRateLimit(
      env.CTL_GATEWAY_RATE_LIMIT_SESSION,
      'CTL_GATEWAY_RATE_LIMIT_SESSION',
      DEFAULT_GATEWAY_RATE_LIMITS.session,
    ),
    charge: parseRateLimit(
      env.CTL_GATEWAY_RATE_LIMIT_CHARGE,
      'CTL_GATEWAY_RATE_LIMIT_CHARGE',
      DEFAULT_GATEWAY_RATE_LIMITS.charge,
    ),
  };
}

/**
 * The owner check that spends the owner's budget, the session lookup that spends a session's, and the per-address limit
 * of `POST /charge`.
 */
export function gatewayRateLimits<P extends Principal & { ownerId?: string }>(
  db: RateLimitBackend,
  limits: GatewayRateLimits,
  auth: (apiKey: string) => Promise<P | undefined>,
) {
  const owners = createLimiter(db, limits.owner, { name: 'gw_owner', what: 'budget owner' });
  const perSession = createLimiter(db, limits.session, { name: 'gw_session', what: 'session' });
  const chargeAddresses = createLimiter(db, limits.charge, { name: 'gw_charge_address', what: 'client address' });
  return {
    /**
     * `POST /charge`, keyless: one point of the client address's budget per request. app.proxy
     * is false, so the address is the connection's (behind a reverse proxy, the proxy's: give it
     * a limit that fits every merchant behind it, or `0` and limit at the proxy).
     */
    charges: rateLimit(chargeAddresses, (ctx) => clientKey(ctx.socket.remoteAddress)) as Middleware,
    // The bootstrap admin key (no owner) is the operator's own and never limited: an incident
    // (disabling owners, stopping sessions in bulk) must not wait for a window to end.
    auth: limitAuthenticate(auth, owners, (p) => p.ownerId),
    /** The session service whose `byToken` (how every agent request finds its session) spends that session's budget. */
    sessions<S extends { byToken(token: string): Promise<{ id: string } | undefined> }>(service: S): S {
      if (!perSession) return service;
      const byToken = async (token: string) => {
        const s = await service.byToken(token);
        if (s) await perSession.consume(s.id);
        return s;
      };
      return { ...service, byToken };
    },
  };
}

/**
 * The budget a client address draws on: an IPv4 address itself, an IPv6 address its /64 (one
 * subscriber's network gets a whole /64, so counting addresses inside it would be no limit).
 * @example clientKey('2001:db8:1:2::7') // '2001:db8:1:2::/64'
 */
export function clientKey(address: string | undefined): string {
  if (!address) return 'unknown';
  const v4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (v4) return v4[1]!;
  if (isIP(address) !== 6) return address;
  // Expand "::" to the zeros it stands for, then keep the first four groups.
  const [head, tail] = address.toLowerCase().split('%')[0]!.split('::') as [string, string | undefined];
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = tail === undefined ? left : [...left, ...Array(8 - left.length - right.length).fill('0'), ...right];
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}
