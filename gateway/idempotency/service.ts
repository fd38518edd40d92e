/**
 * `Idempotency-Key` on `/proxy` (Stripe's semantics; gateway/README.md "Idempotency-Key"): an
 * agent's retry of a request it never got the answer to is answered from the database, never paid
 * again. Per (session, key), for 24 h:
 * - the first request claims the key (one atomic INSERT) and runs; its final answer is stored
 *   and replayed to every retry with `Idempotent-Replayed: true`;
 * - a retry while it runs is 409 `conflict` with `Retry-After`;
 * - the same key with another method, target, purpose or body is 409 `conflict`;
 * - a first attempt that stopped mid-flight (a crash) is settled from its payment once its lease
 *   ends: still open → 409 `payment_unconfirmed` (reconcile settles it), paid → the settled
 *   outcome, never paid → the request runs afresh under the same key.
 * The request's one payment id is chosen at the claim (`paymentId()` hands it to the payment
 * service), so the payment table's primary key is what makes a second payment impossible.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash } from 'node:crypto';
import type { Context } from 'koa';
import type { IncomingMessage } from 'node:http';
import {
  HttpError,
  badRequest,
  describeError,
  randomId,
  timeOrderedId,
  DEFAULT_STATUS_BY_CODE,
  type SqlDatabase,
  type Logger,
} from '../../service-kit/index.js';
import { paidResponseLost } from '../payments/exchange.js';
import {
  claimKey,
  keyRecord,
  takeOverKey,
  finishKey,
  freeKey,
  endLease,
  paymentOutcome,
  pruneExpiredKeys,
  type StoredAnswer,
} from './store.js';

export interface IdempotencyOptions {
  /**
   * How long a claim holds the key before a retry may settle it from its payment (default 120 s: longer than a request
   * lives).
   */
  leaseMs?: number;
  /** How long a key answers (default 24 h); older keys are pruned. */
  ttlMs?: number;
  /** Largest answer body kept for a replay (default 1 MiB); above it the replay is 409 `conflict` naming the size. */
  maxStoredBytes?: number;
}

export interface IdempotencyDeps extends IdempotencyOptions {
  db: SqlDatabase;
  now: () => number;
  /** The app's code → status table (as errorMiddleware's), to store a refusal as it will be answered. */
  statusByCode: Record<string, number>;
  logger?: Logger;
}

export interface KeyedRequest {
  sessionId: string;
  key: string;
  method: string;
  target: string;
  purpose: string | undefined;
  body: Buffer;
}

const KEY = /^[\x20-\x7e]{1,255}$/;
// Headers the replay recomputes or that describe one connection, not the answer.
const NOT_STORED = new Set([
  'content-length',
  'date',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'idempotent-replayed',
]);

/**
 * The request's `Idempotency-Key`, or undefined when it has none. Printable ASCII, 1–255
 * characters, sent once; anything else is 400 `malformed`.
 * @example idempotencyKeyOf(ctx.req) // 'k_3f9a…'
 */
export function idempotencyKeyOf(req: IncomingMessage): string | undefined {
  let count = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2)
    if (req.rawHeaders[i]!.toLowerCase() === 'idempotency-key') count++;
  if (count === 0) return undefined;
  const v = req.headers['idempotency-key'];
  if (count > 1 || typeof v !== 'string' || !KEY.test(v))
    throw badRequest('Idempotency-Key: one value of printable ASCII, 1–255 characters');
  return v;
}

/** What a key compares: the method, target, purpose and body (a hash of them, PROTOCOL.md §1 hash). */
export function requestHash(r: Pick<KeyedRequest, 'method' | 'target' | 'purpose' | 'body'>): string {
  const body = createHash('sha256').update(r.body).digest('hex');
  return createHash('sha256')
    .update(JSON.stringify([r.method, r.target, r.purpose ?? null, body]))
    .digest('hex');
}

const token = () => randomId(16);
// Time-ordered as every other payment id (payments/service.ts): new rows land at the end of the
// primary key's index instead of at random pages of it.
const newPaymentId = () => `pay_${timeOrderedId()}`;

export function createIdempotencyService(deps: IdempotencyDeps) {
  const { db, now } = deps;
  const leaseMs = deps.leaseMs ?? 120_000;
  const ttlMs = deps.ttlMs ?? 24 * 3_600_000;
  const maxStored = deps.maxStoredBytes ?? 1024 * 1024;
  const table = { ...DEFAULT_STATUS_BY_CODE, ...deps.statusByCode };
  const current = new AsyncLocalStorage<{ paymentId: string }>();

  const replay = (ctx: Context, a: StoredAnswer) => {
    if (a.body === null) {
      // The answer was delivered once but not kept (too large): say so, and still never pay again.
      for (const h of ['x-ctl-session-id', 'x-ctl-receipt-id'])
        if (typeof a.headers[h] === 'string') ctx.set(h, a.headers[h] as string);
      ctx.set('Idempotent-Replayed', 'true');
      throw new HttpError(
        409,
        'conflict',
        `Idempotency-Key: the first answer (HTTP ${a.status}, ${a.bodyBytes} bytes) is larger ` +
          `than the ${maxStored} bytes kept for a replay; it is not sent again and nothing is ` +
          'paid again',
      );
    }
    ctx.status = a.status;
    for (const [k, v] of Object.entries(a.headers)) ctx.set(k, v);
    ctx.set('Idempotent-Replayed', 'true');
    ctx.body = Buffer.from(a.body, 'base64');
  };

  /** A gateway refusal as the agent receives it (errorMiddleware renders the same from the same table). */
  const refusalAnswer = (ctx: Context, e: unknown): StoredAnswer => {
    const d = describeError(e, table);
    const body = Buffer.from(JSON.stringify({ error: { code: d.code, message: d.message } }));
    const headers: Record<string, string> = {
      'content-type': 'application/json; charset=utf-8',
      'cache-control': 'no-store',
      'x-ctl-gateway-error': d.code,
    };
    for (const h of ['x-ctl-session-id', 'x-ctl-receipt-id']) {
      const v = ctx.response.get(h);
      if (v) headers[h] = v;
    }
    return { status: d.status, headers, body: body.toString('base64'), bodyBytes: body.length };
  };

  const merchantAnswer = (ctx: Context): StoredAnswer => {
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(ctx.response.headers)) {
      if (v === undefined || NOT_STORED.has(k.toLowerCase())) continue;
      headers[k.toLowerCase()] = Array.isArray(v) ? v.map(String) : String(v);
    }
    const raw = ctx.body;
    const body = Buffer.isBuffer(raw)
      ? raw
      : raw == null
        ? Buffer.alloc(0)
        : Buffer.from(typeof raw === 'string' ? raw : JSON.stringify(raw));
    return {
      status: ctx.status,
      headers,
      body: body.length <= maxStored ? body.toString('base64') : null,
      bodyBytes: body.length,
    };
  };

  /** The settled outcome of a first attempt that paid and stopped before its answer was stored. */
  const lostAnswer = (sessionId: string, receiptId: string | null): StoredAnswer => {
    const message =
      `the payment was made${receiptId ? ` (receipt ${receiptId})` : ''} but the first attempt ` +
      `stopped before the merchant's answer was kept; this key will not pay again`;
    const body = Buffer.from(JSON.stringify({ error: { code: 'paid_response_lost', message } }));
    const headers: Record<string, string> = {
      'content-type': 'application/json; charset=utf-8',
      'cache-control': 'no-store',
      'x-ctl-gateway-error': 'paid_response_lost',
      'x-ctl-session-id': sessionId,
    };
    if (receiptId) headers['x-ctl-receipt-id'] = receiptId;
    return { status: 502, headers, body: body.toString('base64'), bodyBytes: body.length };
  };

  async function execute(
    ctx: Context,
    r: KeyedRequest,
    h: { sessionId: string; key: string; attempt: string },
    paymentId: string,
    run: () => Promise<void>,
  ) {
    try {
      await current.run({ paymentId }, run);
    } catch (e) {
      const answer = await settleFailure(ctx, h, paymentId, e).catch((err) => {
        deps.logger?.warn(
          { err, key: r.key },
          'idempotency: the refusal was not recorded; the key settles when its lease ends',
        );
        return e;
      });
      throw answer;
    }
    // The merchant's answer: kept even if it is an error of the merchant's own.
    await finishKey(db, h, merchantAnswer(ctx)).catch((err) =>
      deps.logger?.warn(
        { err, key: r.key },
        'idempotency: the answer was not stored; the key settles when its lease ends',
      ),
    );
  }

  /**
   * A gateway refusal: kept when money moved under the key (paid); left for reconcile when the
   * payment is still open; otherwise the key is freed, since running the request again cannot
   * pay twice (Stripe keeps 4xx/5xx too; here a refusal that moved nothing, such as
   * `session_paused`, must let the continuation retry through).
   */
  async function settleFailure(
    ctx: Context,
    h: { sessionId: string; key: string; attempt: string },
    paymentId: string,
    e: unknown,
  ): Promise<unknown> {
    const p = await paymentOutcome(db, paymentId);
    if (p?.state === 'paid') {
      // Money moved: whatever failed after it (a lost answer, a database that dropped the commit's
      // acknowledgement), the agent is told it paid, never a refusal it would retry and pay again.
      const answered =
        p.receiptId && !(e instanceof HttpError && e.code === 'paid_response_lost') ? paidResponseLost(p.receiptId) : e;
      if (p.receiptId) ctx.set('X-Ctl-Receipt-Id', p.receiptId);
      await finishKey(db, h, refusalAnswer(ctx, answered));
      return answered;
    }
    if (p && p.state !== 'released') await endLease(db, h, now());
    else await freeKey(db, h);
    return e;
  }

  /**
   * A request without a key runs once, under a payment id of its own, so that when it fails after
   * its payment was committed (a lost commit acknowledgement, a failure after it) the answer still
   * says it paid, with the receipt, rather than a refusal the caller would retry and pay again.
   */
  async function unkeyed(ctx: Context, run: () => Promise<void>): Promise<void> {
    const paymentId = newPaymentId();
    try {
      await current.run({ paymentId }, run);
    } catch (e) {
      if (e instanceof HttpError && e.code === 'paid_response_lost') throw e;
      const p = await paymentOutcome(db, paymentId).catch(() => undefined);
      if (p?.state === 'paid' && p.receiptId) {
        ctx.set('X-Ctl-Receipt-Id', p.receiptId);
        throw paidResponseLost(p.receiptId); // the failure is the gateway's own: its text is not the agent's
      }
      throw e;
    }
  }

  return {
    /** The payment id of the request running in this async context (payments/service.ts authorize). */
    paymentId: (): string | undefined => current.getStore()?.paymentId,

    /**
     * Runs `run` (which sets ctx's answer) at most once per key, or answers from the key.
     * Without a key it just runs.
     */
    async around(ctx: Context, r: KeyedRequest | undefined, run: () => Promise<void>): Promise<void> {
      if (!r) return unkeyed(ctx, run);
      const hash = requestHash(r);
      for (let tries = 0; tries < 3; tries++) {
        const t = now();
        const attempt = token();
        const paymentId = newPaymentId();
        const h = { sessionId: r.sessionId, key: r.key, attempt };
        if (
          await claimKey(db, {
            sessionId: r.sessionId,
            key: r.key,
            requestHash: hash,
            attempt,
            paymentId,
            now: t,
            leaseUntil: t + leaseMs,
            expiresAt: t + ttlMs,
          })
        ) {
          return execute(ctx, r, h, paymentId, run);
        }
        const row = await keyRecord(db, r.sessionId, r.key);
        if (!row) continue; // pruned in between: claim again
        if (row.requestHash !== hash)
          throw new HttpError(
            409,
            'conflict',
            'Idempotency-Key: already used in this session with another method, target, purpose or body',
          );
        if (row.answer) return replay(ctx, row.answer);
        if (row.leaseUntil > t) {
          ctx.set('Retry-After', '1');
          throw new HttpError(
            409,
            'conflict',
            'Idempotency-Key: a request with this key is in flight; retry later for its answer',
          );
        }
        // The lease ran out: the first attempt stopped (or outlived it). Its payment says what happened.
        const held = { sessionId: r.sessionId, key: r.key, attempt: row.attempt };
        const p = await paymentOutcome(db, row.paymentId);
        if (p && (p.state === 'reserved' || p.state === 'paying')) {
          throw new HttpError(
            409,
            'payment_unconfirmed',
            'Idempotency-Key: the first attempt stopped mid-payment; its outcome is not settled ' +
              'yet (reconcile settles it), retry later',
          );
        }
        if (p?.state === 'paid') {
          const a = lostAnswer(r.sessionId, p.receiptId);
          if (await finishKey(db, held, a)) return replay(ctx, a);
          continue; // its holder finished meanwhile: read again
        }
        // No money moved: run afresh. A released payment id is spent (its row exists), so a new one.
        const next = p ? newPaymentId() : row.paymentId;
        if (await takeOverKey(db, held, { attempt, paymentId: next, leaseUntil: t + leaseMs }))
          return execute(ctx, r, h, next, run);
      }
      ctx.set('Retry-After', '1');
      throw new HttpError(409, 'conflict', 'Idempotency-Key: the key changed hands while being read; retry');
    },

    /** Deletes keys older than their 24 h. */
    prune: () => pruneExpiredKeys(db, now()),
  };
}

export type IdempotencyService = ReturnType<typeof createIdempotencyService>;
