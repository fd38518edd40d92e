/**
 * Merchant middleware (spec §4.4): reads the SBA from `Authorization: CTL <base64>` or a body
 * `{ "sba": … }`, verifies it, and either sets `req.ctl` / `ctx.state.ctl` or answers
 * 402 `{ error: { code, message } }` (spec §7). Amount and currency may depend on the request.
 *
 * The body is read from its own text when the request still has it, with the strict I-JSON
 * parser (PROTOCOL.md §2), so a repeated member is `malformed` as in the header: Express
 * `req.rawBody` (a body parser's `verify` hook) or a text or bytes `req.body` (`express.text()`,
 * `express.raw()`); Koa `ctx.request.rawBody` (`@koa/bodyparser` sets it) or a text or bytes
 * `ctx.request.body`. A body only available parsed (`express.json()` alone) has lost that check:
 * its `sba` is taken as it is, or refused with `requireRawBody`.
 */
import type { CaptureResult } from './capture.js';
import type { VerifyCtl, VerifyCtlOptions } from './verify.js';
import type { Delegation, PolicyGrant, SignedBudgetAuthorization } from '../artifacts/types.js';
import { decodeSbaHeader, sbaFromBodyText } from './presentation.js';
import { toErrorInfo, malformed, type CtlErrorInfo } from '../errors.js';

type Dyn<T, R> = T | ((req: R) => T | Promise<T>);

/**
 * The options of `verifyCtl`, with amount, currency and merchant optionally computed per request.
 * Defaults worth knowing: `trackSpend` is off (each SBA is checked on its own, so the same SBA
 * presented twice passes twice; turn it on to refuse `replay` and keep cumulative spend per grant
 * in `spendStorage`, memory by default); revocation answers are cached `revocationTtl` = 60 000 ms
 * (spec §8 merchant example) per grant, so a revocation takes up to a minute to be seen online;
 * JWKS fetched from `jwksUrl` are cached `jwksTtl` = 300 000 ms.
 * @example ctl({ amount: (req) => priceOf(req), currency: 'USD', jwksUrl, trackSpend: true, revocationTtl: 10_000 })
 */
export interface MiddlewareOptions<R> extends Omit<VerifyCtlOptions, 'amount' | 'currency' | 'merchantId'> {
  amount: Dyn<string, R>;
  currency: Dyn<string, R>;
  merchantId?: Dyn<string | undefined, R>;
  /**
   * Refuse (`malformed`) an SBA that arrives in a body already parsed into an object with no raw
   * text beside it: `JSON.parse` kept only the last of two repeated members, so the strict I-JSON
   * check (PROTOCOL.md §2) can no longer be made. Default `false` (the parsed `sba` is verified as
   * it is). A string `sba` field (a form) is still parsed strictly and is not affected.
   */
  requireRawBody?: boolean;
}

export interface CtlRequestState {
  valid: true;
  grant: PolicyGrant;
  sba: SignedBudgetAuthorization<PolicyGrant | Delegation>;
  amount: string;
  currency: string;
  /**
   * For a hold accepted with spend tracked (PROTOCOL.md §15): captures what was used, at most the
   * hold, once, on the storage and clock of the verification. Never throws.
   */
  capture?: (amount: string) => Promise<CaptureResult>;
  /** The hold's name for `captureCtl` after a restart (as `verifyCtl`'s result). */
  holdId?: string;
}

// Express users get `req.ctl` typed: Express declares the global `Express.Request` interface for
// such augmentation, and this lives in the shipped declarations without importing Express's types.
declare global {
  namespace Express {
    interface Request {
      /** Set by `ctl()` when the SBA verified; absent on routes without the middleware. */
      ctl?: CtlRequestState;
    }
  }
}

const resolve = async <T, R>(v: Dyn<T, R>, req: R): Promise<T> =>
  typeof v === 'function' ? (v as (r: R) => T)(req) : v;

/** The first candidate that is a body's raw text (a string, or bytes: Node's byte buffers are Uint8Arrays). */
function rawText(...candidates: unknown[]): string | Uint8Array | undefined {
  for (const v of candidates) if (typeof v === 'string' || v instanceof Uint8Array) return v;
  return undefined;
}

/** The SBA the body presents, from its raw text when it is JSON, else from the parsed body. */
function sbaFromBody(
  raw: string | Uint8Array | undefined,
  body: unknown,
  requireRawBody: boolean | undefined,
): unknown {
  const fromText = raw === undefined ? undefined : sbaFromBodyText(raw);
  if (fromText) return fromText.sba;
  const parsed =
    body && typeof body === 'object' && !(body instanceof Uint8Array)
      ? (body as Record<string, unknown>)['sba']
      : undefined;
  if (parsed !== undefined && typeof parsed !== 'string' && requireRawBody) {
    malformed('requireRawBody: the body arrived parsed, without its raw text');
  }
  return parsed;
}

async function verifyRequest<R>(
  verify: VerifyCtl,
  options: MiddlewareOptions<R>,
  req: R,
  header: unknown,
  body: unknown,
  raw: string | Uint8Array | undefined,
): Promise<{ ok: true; state: CtlRequestState } | { ok: false; error: CtlErrorInfo }> {
  let sba: unknown;
  try {
    const fromBody = sbaFromBody(raw, body, options.requireRawBody);
    sba = fromBody !== undefined ? fromBody : decodeSbaHeader(header);
  } catch (e) {
    return { ok: false, error: toErrorInfo(e) };
  }
  const { amount, currency, merchantId, requireRawBody: _, ...rest } = options;
  const r = await verify(sba, {
    ...rest,
    amount: await resolve(amount, req),
    currency: await resolve(currency, req),
    merchantId: merchantId === undefined ? undefined : await resolve(merchantId, req),
  });
  if (!r.valid) return { ok: false, error: r.error };
  const state: CtlRequestState = { valid: true, grant: r.grant, sba: r.sba, amount: r.amount, currency: r.currency };
  const capture = verify.captureCtl;
  const holdId = r.holdId;
  if (holdId !== undefined && capture) {
    // The storage and the clock the verification used (PROTOCOL.md §15).
    const { spendStorage, now, timeFloor } = options;
    state.holdId = holdId;
    state.capture = (amount) => capture(holdId, amount, { spendStorage, now, timeFloor });
  }
  return { ok: true, state };
}

/**
 * Express/Connect middleware.
 * @example app.post('/charge', express.json({ verify: (req, _res, buf) => { req.rawBody = buf } }), ctl({ amount:
 * '500', currency: 'USD', jwksUrl }), handler)
 */
export function createExpressMiddleware(verify: VerifyCtl, options: MiddlewareOptions<any>) {
  return async (req: any, res: any, next: (err?: unknown) => void) => {
    try {
      const r = await verifyRequest(
        verify,
        options,
        req,
        req.headers?.['authorization'],
        req.body,
        rawText(req.rawBody, req.body),
      );
      if (r.ok) {
        req.ctl = r.state;
        return next();
      }
      res.statusCode = 402;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ error: r.error }));
    } catch (e) {
      next(e);
    }
  };
}

/**
 * Koa middleware. @example app.use(bodyParser()); app.use(ctlKoa({ amount: (ctx) => price(ctx), currency: 'USD',
 * jwksUrl }))
 */
export function createKoaMiddleware(verify: VerifyCtl, options: MiddlewareOptions<any>) {
  return async (ctx: any, next: () => Promise<unknown>) => {
    const request = ctx.request;
    const r = await verifyRequest(
      verify,
      options,
      ctx,
      ctx.get?.('authorization') || undefined,
      request?.body,
      rawText(request?.rawBody, request?.body),
    );
    if (!r.ok) {
      ctx.status = 402;
      ctx.body = { error: r.error };
      return;
    }
    ctx.state.ctl = r.state;
    await next();
  };
}
