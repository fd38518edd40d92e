/**
 * The one place that turns anything thrown into `{ error: { code, message } }` (ARCHITECTURE.md
 * rule 7). Stacks and internal messages never reach the client; they go to the log.
 */
import type { Middleware } from 'koa';
import { HttpError } from './http-error.js';
import { DatabaseUnavailableError, isConnectionLoss } from './connection-loss.js';

/** The protocol codes of PROTOCOL.md §9 mapped to HTTP status. A service may override entries. */
export const DEFAULT_STATUS_BY_CODE: Readonly<Record<string, number>> = {
  malformed: 400,
  unsupported_version: 400,
  policy_hash_mismatch: 400,
  currency_mismatch: 400,
  grant_signature_invalid: 401,
  sba_signature_invalid: 401,
  receipt_signature_invalid: 401,
  unknown_key: 401,
  key_purpose_mismatch: 401,
  // The artifact's signer is known and not trusted here: a refusal (RFC 9110 §15.5.4), not the
  // caller's failed authentication (§15.5.2), so 403 and no challenge a new credential could meet.
  issuer_not_trusted: 403,
  trust_bundle_invalid: 401,
  trust_bundle_expired: 401,
  trust_bundle_rollback: 409,
  not_yet_valid: 401,
  grant_expired: 402,
  grant_revoked: 402,
  sba_expired: 402,
  amount_exceeds_authorization: 402,
  budget_exceeded: 402,
  velocity_exceeded: 402,
  offline_limit_exceeded: 402,
  rail_not_allowed: 402,
  asset_not_allowed: 402,
  purpose_not_allowed: 402,
  destination_not_allowed: 402,
  replay: 409,
  session_paused: 402,
  session_revoked: 410,
  session_expired: 410,
  continuation_invalid: 403,
  target_not_allowed: 403,
  payment_terms_refused: 502,
  revocation_unavailable: 503,
  rate_limited: 429,
  // PROTOCOL.md §16
  window_exceeded: 402,
  delegation_invalid: 400,
  capture_exceeds_hold: 402,
  hold_expired: 402,
  unsupported_feature: 501,
};

const CODE_BY_STATUS: Record<number, string> = {
  400: 'malformed',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  409: 'conflict',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'rate_limited',
  503: 'unavailable',
};

export interface ErrorLogger {
  error(obj: object, msg?: string): void;
  warn?(obj: object, msg?: string): void;
}

export interface ErrorMiddlewareOptions {
  /** Where unexpected errors (5xx) are logged with their stack. */
  logger?: ErrorLogger;
  /** Overrides of DEFAULT_STATUS_BY_CODE for this service. */
  statusByCode?: Record<string, number>;
}

export interface ErrorBody {
  /** `resetsAt` with `window_exceeded`: when the full window ends (PROTOCOL.md §13). */
  error: { code: string; message: string; resetsAt?: string };
}

/** A CtlError from the SDK, recognised by shape so this module needs nothing from src/. */
function isProtocolError(e: unknown, table: Record<string, number>): e is Error & { code: string } {
  return (
    e instanceof Error &&
    typeof (e as { code?: unknown }).code === 'string' &&
    (e as unknown as { code: string }).code in table
  );
}

/**
 * PostgreSQL refusing a character of a request value (SQLSTATE 22021: NUL in TEXT, or invalid
 * UTF-8; 22P05: untranslatable). Only the input can cause these, so they are the client's
 * `malformed`, but a guard missed them: they are logged at warn so the gap gets closed.
 * Recognised by pg's DatabaseError shape (`severity` + SQLSTATE `code`).
 */
function isUnstorableCharacter(e: unknown): boolean {
  const any = e as { code?: unknown; severity?: unknown };
  return e instanceof Error && typeof any.severity === 'string' && (any.code === '22021' || any.code === '22P05');
}

/** Maps any thrown value to `{ status, code, message }`; exported for tests and non-Koa callers. */
export function describeError(e: unknown, statusByCode: Record<string, number> = DEFAULT_STATUS_BY_CODE) {
  // A lost database connection the database layer did not wrap (a library on the pool): 503, not 500.
  if (!(e instanceof HttpError) && isConnectionLoss(e, false))
    return describeError(new DatabaseUnavailableError(e), statusByCode);
  if (e instanceof HttpError) return { status: e.status, code: e.code, message: e.message, expected: e.status < 500 };
  if (isUnstorableCharacter(e)) {
    return {
      status: 400,
      code: 'malformed',
      message: 'a value contains a character that cannot be stored (such as U+0000)',
      expected: true,
      warn: true,
    };
  }
  if (isProtocolError(e, statusByCode)) {
    const status = statusByCode[e.code];
    const resetsAt = (e as { resetsAt?: unknown }).resetsAt;
    return {
      status,
      code: e.code,
      message: e.message,
      expected: status < 500,
      ...(typeof resetsAt === 'string' ? { resetsAt } : {}),
    };
  }
  // http-errors from Koa, the router or the body parser: `status` + `expose` for 4xx.
  const any = e as { status?: unknown; statusCode?: unknown; expose?: unknown; message?: unknown; type?: unknown };
  const status =
    typeof any?.status === 'number' ? any.status : typeof any?.statusCode === 'number' ? any.statusCode : 500;
  if (status >= 400 && status < 500) {
    const code = CODE_BY_STATUS[status] ?? 'malformed';
    let message = any.expose && typeof any.message === 'string' ? any.message : code.replace(/_/g, ' ');
    if (status === 400 && any.type === 'entity.parse.failed') message = 'the body is not valid JSON';
    return { status, code, message, expected: true };
  }
  if (status === 503) return { status, code: 'unavailable', message: 'a dependency is unavailable', expected: false };
  return { status: 500, code: 'internal', message: 'internal error', expected: false };
}

/**
 * A dependency that failed (502–504 raised on purpose: an upstream merchant, a rail, the
 * database) is the world, not a bug here: `warn` with its code and message, no stack. Anything
 * else unexpected is `error` with the stack.
 */
function logFailure(
  logger: ErrorLogger | undefined,
  e: unknown,
  d: { status: number; code: string; message: string },
  method: string,
  path: string,
): void {
  if ((e instanceof HttpError || d.code === 'unavailable') && d.status >= 502 && d.status <= 504 && logger?.warn) {
    // What the dependency said (a driver's message) is for the operator, never for the client.
    const cause = (e as { cause?: unknown }).cause ?? (e instanceof HttpError ? undefined : e);
    logger.warn(
      {
        status: d.status,
        code: d.code,
        detail: d.message,
        ...(cause instanceof Error ? { cause: cause.message } : {}),
        method,
        path,
      },
      'upstream failed',
    );
  } else logger?.error({ err: e, method, path }, 'request failed');
}

/**
 * Koa middleware; mount it first. Unknown routes (nothing set a body) become `404 not_found`.
 * @example app.use(errorMiddleware({ logger }))
 */
export function errorMiddleware(options: ErrorMiddlewareOptions = {}): Middleware {
  const table = { ...DEFAULT_STATUS_BY_CODE, ...options.statusByCode };
  return async (ctx, next) => {
    try {
      await next();
      // Nothing answered (unknown route), or the router set 405/501 without a body.
      if (ctx.status === 404 && ctx.body == null)
        throw new HttpError(404, 'not_found', `no route ${ctx.method} ${ctx.path}`);
      if (ctx.status >= 400 && ctx.body == null) {
        throw new HttpError(ctx.status, CODE_BY_STATUS[ctx.status] ?? 'malformed', `${ctx.method} ${ctx.path} refused`);
      }
    } catch (e) {
      const d = describeError(e, table);
      if (!d.expected) logFailure(options.logger, e, d, ctx.method, ctx.path);
      else if ('warn' in d)
        options.logger?.warn?.(
          { err: e, method: ctx.method, path: ctx.path },
          'a request value reached the database unchecked',
        );
      ctx.status = d.status;
      ctx.set('Cache-Control', 'no-store');
      if (d.status === 401) ctx.set('WWW-Authenticate', 'Bearer');
      if (e instanceof HttpError && e.headers) ctx.set(e.headers);
      const body: ErrorBody = { error: { code: d.code, message: d.message } };
      if ('resetsAt' in d && d.resetsAt) {
        // A full window (PROTOCOL.md §13): when to come back, in the body and as Retry-After.
        body.error.resetsAt = d.resetsAt;
        const wait = Math.ceil((Date.parse(d.resetsAt) - Date.now()) / 1000);
        if (Number.isFinite(wait)) ctx.set('Retry-After', String(Math.max(1, wait)));
      }
      ctx.body = body;
    }
  };
}
