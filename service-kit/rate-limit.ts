/**
 * Rate limits (spec §8 "a per-owner rate limit is planned"; PROTOCOL.md §9 `rate_limited`):
 * fixed windows of `points` requests per `seconds`, counted by rate-limiter-flexible. On
 * PostgreSQL the counters live in one table of the service's own database (RateLimiterPostgres
 * on its pool), so every instance sharing the database spends the same budget; on SQLite (the
 * embedded case: one instance) and where no database is given they live in memory, lost on
 * restart. Over the limit: `429 rate_limited` with `Retry-After` (seconds).
 *
 * Two ways in: `rateLimit(limiter, keyOf)`, a Koa middleware keyed on the request (a client
 * address), and `limitAuthenticate(authenticate, limiter, keyOf)`, which counts after an API key
 * has been verified, so a guessed or forged key never spends anyone's budget nor writes a
 * counter. (`limiter.consume(key)` serves any other credential the same way, once it is found.)
 */
import type { Middleware, Context } from 'koa';
import type pg from 'pg';
import {
  RateLimiterMemory,
  RateLimiterPostgres,
  RateLimiterRes,
  type RateLimiterAbstract,
} from 'rate-limiter-flexible';
import { HttpError } from './http-error.js';
import type { Principal } from './api-keys.js';

/** `points` requests per `seconds`. */
export interface RateLimit {
  points: number;
  seconds: number;
}

/** The table every limiter of a database shares (keys are prefixed by the limiter's name). */
export const RATE_LIMIT_TABLE = 'ctl_rate_limits';

/**
 * Parses a limit setting: `N/Ss` or `N/S` (N requests per S seconds), `N` alone (per 60 s),
 * `0` (disabled: undefined), unset (the default). Throws a RangeError naming the variable.
 * @example parseRateLimit(env.CTL_GATEWAY_RATE_LIMIT_OWNER, 'CTL_GATEWAY_RATE_LIMIT_OWNER', { points: 6000, seconds: 60
 * })
 */
export function parseRateLimit(
  value: string | undefined,
  name: string,
  fallback: RateLimit | undefined,
): RateLimit | undefined {
  const v = value?.trim();
  if (v === undefined || v === '') return fallback;
  const m = /^(\d{1,12})(?:\/(\d{1,7})s?)?$/.exec(v);
  if (!m)
    throw new RangeError(
      `${name}: expected N/Ss (N requests per S seconds, e.g. 6000/60s), N (per 60 s) or ` +
        `0 (no limit), got '${v.slice(0, 40)}'`,
    );
  const points = Number(m[1]);
  const seconds = m[2] === undefined ? 60 : Number(m[2]);
  if (points === 0) return undefined;
  if (seconds < 1) throw new RangeError(`${name}: the window must be at least 1 s`);
  return { points, seconds };
}

/** `6000/60s`, for logs and messages. */
export const formatRateLimit = (l: RateLimit | undefined) => (l ? `${l.points}/${l.seconds}s` : '0');

/** Where counters live: a SqlDatabase or a store with its dialect and, on PostgreSQL, its pool. */
export interface RateLimitBackend {
  readonly dialect: 'sqlite' | 'postgres';
  readonly pgPool?: pg.Pool;
}

export interface Limiter {
  /** What this limiter allows, and what a key stands for (`budget owner`, `session`, …) in messages. */
  readonly limit: RateLimit;
  readonly what: string;
  /** Spends one point of `key`'s budget; throws 429 `rate_limited` when it is spent. */
  consume(key: string): Promise<void>;
}

export interface LimiterOptions {
  /** Distinguishes this limiter's keys in the shared table: [a-z0-9_-]. */
  name: string;
  /** What a key stands for, in the refusal message ("owner", "API key", "client address"). */
  what: string;
  /** Counters in memory even on PostgreSQL: per-instance limits on hot paths that must not write. */
  local?: boolean;
}

/**
 * A limiter on `backend`, or undefined when `limit` is undefined (disabled). On PostgreSQL the
 * table is created on first use; should the database fail, an in-memory limiter of the same
 * size stands in (rate-limiter-flexible's insurance), so an outage neither lifts every limit
 * nor refuses every request for want of a counter. Each request is one atomic upsert
 * (`INSERT … ON CONFLICT … RETURNING`): concurrent requests on any instances never both take
 * the last point.
 * @example const owners = createLimiter(db, { points: 6000, seconds: 60 }, { name: 'gw_owner', what: 'owner' })
 */
export function createLimiter(
  backend: RateLimitBackend | undefined,
  limit: RateLimit | undefined,
  options: LimiterOptions,
): Limiter | undefined {
  if (!limit) return undefined;
  if (!/^[a-z0-9_-]{1,40}$/.test(options.name))
    throw new RangeError(`limiter name: [a-z0-9_-]{1,40}, got '${options.name}'`);
  if (
    !Number.isSafeInteger(limit.points) ||
    limit.points < 1 ||
    !Number.isSafeInteger(limit.seconds) ||
    limit.seconds < 1
  ) {
    throw new RangeError(`rate limit ${options.name}: points and seconds must be positive integers`);
  }
  const base = { keyPrefix: options.name, points: limit.points, duration: limit.seconds };
  // Stands in while the database fails (rate-limiter-flexible's insurance): per instance.
  const memory = new RateLimiterMemory(base);
  let current: () => Promise<RateLimiterAbstract> = async () => memory;
  if (backend?.dialect === 'postgres' && backend.pgPool && !options.local) {
    const pool = backend.pgPool;
    let store: Promise<RateLimiterAbstract> | undefined;
    // The table is made on first use; a failed attempt is tried again by the next request.
    current = () =>
      (store ??= createCounterTable(pool).then(
        () =>
          new RateLimiterPostgres({
            ...base,
            storeClient: pool,
            storeType: 'pool',
            tableName: RATE_LIMIT_TABLE,
            tableCreated: true,
            // Once a key is over its limit, this instance refuses it from memory until the
            // window ends: a flood from one key costs no database write.
            inMemoryBlockOnConsumed: limit.points + 1,
            insuranceLimiter: memory,
          }),
        () => {
          store = undefined;
          return memory;
        },
      ));
  }
  return {
    limit,
    what: options.what,
    async consume(key) {
      const limiter = await current();
      try {
        await limiter.consume(key);
      } catch (e) {
        if (!(e instanceof RateLimiterRes)) throw e;
        throw rateLimited(options.what, limit, e.msBeforeNext);
      }
    },
  };
}

/**
 * rate-limiter-flexible's table (same columns), but UNLOGGED: a counter is not worth a WAL flush
 * on every request. It is emptied by a PostgreSQL crash and not copied to replicas; limits then
 * start afresh, which is all a lost window costs.
 */
export async function createCounterTable(pool: Pick<pg.Pool, 'query'>): Promise<void> {
  try {
    await pool.query(
      `CREATE UNLOGGED TABLE IF NOT EXISTS ${RATE_LIMIT_TABLE} (key varchar(255) PRIMARY ` +
        'KEY, points integer NOT NULL DEFAULT 0, expire bigint)',
    );
  } catch (e) {
    // Instances creating it at once: IF NOT EXISTS does not serialise them, and the loser fails
    // with 23505 (pg_type's index), 42710 (type exists) or 42P07 (relation exists) depending on
    // where it lost. Whichever it was, the table being there now is what counts.
    const found = await pool
      .query(`SELECT to_regclass('${RATE_LIMIT_TABLE}') IS NOT NULL AS found`)
      .catch(() => undefined);
    if (found?.rows[0]?.found !== true) throw e;
  }
}

/** 429 `rate_limited` with `Retry-After` in whole seconds (at least 1). */
export function rateLimited(what: string, limit: RateLimit, msBeforeNext: number): HttpError {
  const retryAfter = Math.max(1, Math.ceil(msBeforeNext / 1000));
  return new HttpError(
    429,
    'rate_limited',
    `rate limit of ${limit.points} requests per ${limit.seconds} s for this ${what} reached; retry in ${retryAfter} s`,
    { 'Retry-After': String(retryAfter) },
  );
}

/**
 * Koa middleware: spends one point of `keyOf(ctx)`'s budget before the rest of the chain;
 * requests whose key is undefined, or with no limiter, pass untouched.
 * @example app.use(rateLimit(perAddress, (ctx) => ctx.socket.remoteAddress))
 */
export function rateLimit(limiter: Limiter | undefined, keyOf: (ctx: Context) => string | undefined): Middleware {
  if (!limiter) return (_ctx, next) => next();
  return async (ctx, next) => {
    const key = keyOf(ctx);
    if (key !== undefined) await limiter.consume(key);
    return next();
  };
}

/**
 * Wraps an API-key check: a key that verifies spends one point of `keyOf(principal)`'s budget
 * (its owner, or the key itself; undefined: not limited), and over the limit the check throws
 * 429. A key that does not verify spends nothing, so nobody can exhaust another's budget by
 * sending its key id.
 * @example authenticate: limitAuthenticate(createApiKeyAuth({ findKey }), limiter, (p) => p.keyId)
 */
export function limitAuthenticate<P extends Principal>(
  authenticate: (apiKey: string) => Promise<P | undefined>,
  limiter: Limiter | undefined,
  keyOf: (p: P) => string | undefined,
): (apiKey: string) => Promise<P | undefined> {
  if (!limiter) return authenticate;
  return async (apiKey) => {
    const p = await authenticate(apiKey);
    const key = p && keyOf(p);
    if (key !== undefined) await limiter.consume(key);
    return p;
  };
}
