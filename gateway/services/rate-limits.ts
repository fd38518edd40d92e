/**
 * The gateway's rate limits (spec §8 "a per-owner rate limit is planned"): per budget owner on
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
import {
  createLimiter,
  formatRateLimit,
  limitAuthenticate,
  parseRateLimit,
  rateLimit,
  type RateLimit,
  type RateLimitBackend,
} from '../../service-kit/index.js';
import type { OwnerPrincipal } from './owner-auth.js';

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

/** Longest a session may run (`expiresAt` at most this far ahead): 30 days. */
export const DEFAULT_MAX_SESSION_SECONDS = 30 * 86_400;

/** `CTL_GATEWAY_RATE_LIMIT_OWNER`, `CTL_GATEWAY_RATE_LIMIT_SESSION`, `CTL_GATEWAY_RATE_LIMIT_CHARGE`: `N/Ss`, or `0` for none. */
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

/** `CTL_GATEWAY_MAX_SESSION_SECONDS`: a positive integer (default 30 days). */
export function maxSessionSecondsFromEnv(env: Record<string, string | undefined>): number {
  const v = env.CTL_GATEWAY_MAX_SESSION_SECONDS?.trim();
  if (!v) return DEFAULT_MAX_SESSION_SECONDS;
  if (!/^[1-9][0-9]{0,9}$/.test(v))
    throw new RangeError(`CTL_GATEWAY_MAX_SESSION_SECONDS: a positive integer of seconds, got '${v.slice(0, 40)}'`);
  return Number(v);
}

/** The effective limits, for the start-up log line. */
export function describeLimits(o: { rateLimits?: GatewayRateLimits; maxSessionSeconds?: number }) {
  const l = o.rateLimits ?? DEFAULT_GATEWAY_RATE_LIMITS;
  return {
    rateLimitOwner: formatRateLimit(l.owner),
    rateLimitSession: formatRateLimit(l.session),
    rateLimitCharge: formatRateLimit(l.charge),
    maxSessionSeconds: o.maxSessionSeconds ?? DEFAULT_MAX_SESSION_SECONDS,
  };
}

/** The owner check that spends the owner's budget, the session lookup that spends a session's, and the per-address limit of `POST /charge`. */
export function gatewayRateLimits(
  db: RateLimitBackend,
  limits: GatewayRateLimits,
  auth: (apiKey: string) => Promise<OwnerPrincipal | undefined>,
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
