/**
 * Agent side (spec §4.2): `ANY /proxy` with `Authorization: Bearer gw_sess_…`, `X-Target-Url`,
 * optional `X-Target-Method` and `X-Ctl-Purpose`. The agent never sees the payment exchange:
 * it gets the merchant's final response, or the gateway's refusal `{ error: { code, message } }`
 * (marked `X-Ctl-Gateway-Error`, app.ts).
 */
import type Router from '@koa/router';
import { CtlError } from '../../src/index.js';
import { HttpError, unauthorized, badRequest, readsBody, canonicalUrlHost } from '../../service-kit/index.js';
import { effectiveState } from '../sessions/store.js';
import { sessionTokenOf, type SessionService } from '../sessions/service.js';
import type { PaymentProtocol } from '../payments/schemes/scheme.js';
import { cleanRequestHeaders, cleanResponseHeaders, type Forwarder } from '../net/forwarder.js';
import { idempotencyKeyOf, type IdempotencyService } from '../idempotency/service.js';
import { setReceiptLogIndex } from '../log/entries.js';
import type { TransparencyLog } from '../../service-kit/tlog/index.js';
import type { IncomingMessage } from 'node:http';

/** The methods the proxy forwards (X-Target-Method, or the request's own). */
export const PROXY_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
const METHOD = new RegExp(`^(${PROXY_METHODS.join('|')})$`);

/** The agent's body, at most `limit` bytes (413 beyond). */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > limit)
      return reject(new HttpError(413, 'payload_too_large', `the body is larger than ${limit} bytes`));
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        req.pause();
        reject(new HttpError(413, 'payload_too_large', `the body is larger than ${limit} bytes`));
      } else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

export function proxyRoutes(
  router: Router,
  o: {
    sessions: SessionService;
    protocols: PaymentProtocol<any>[];
    forwarder: Forwarder;
    now: () => number;
    maxBodyBytes: number;
    idempotency: IdempotencyService;
    /** The gateway's transparency log: a paid answer names its receipt's index (`X-Ctl-Log-Index`). */
    log?: TransparencyLog;
  },
): void {
  // The agent's body is the merchant's, forwarded as bytes: this route reads a body of any type.
  router.all(
    '/proxy',
    readsBody(async (ctx) => {
      const token = sessionTokenOf(ctx.get('authorization'));
      if (!token) throw unauthorized('a session token is required (Authorization: Bearer gw_sess_…)');
      const session = await o.sessions.byToken(token);
      if (!session) throw unauthorized('the session token is not valid');
      ctx.set('X-Ctl-Session-Id', session.id);
      // spec §3: refused before anything is forwarded.
      const state = effectiveState(session, o.now());
      if (state === 'revoked') throw new CtlError('session_revoked', 'the session has been revoked');
      if (state === 'expired') throw new CtlError('session_expired', 'the session has expired');
      const key = idempotencyKeyOf(ctx.req);

      const target = ctx.get('x-target-url');
      if (!target) throw badRequest('X-Target-Url: required');
      let url: URL;
      try {
        url = new URL(target);
      } catch {
        throw new CtlError('target_not_allowed', 'X-Target-Url: not an absolute URL');
      }
      const method = (ctx.get('x-target-method') || ctx.method).toUpperCase();
      if (!METHOD.test(method)) throw badRequest('X-Target-Method: not a supported method');
      // The session's default stands in for an agent that cannot send the header (the egress proxy).
      const purpose = ctx.get('x-ctl-purpose') || (session.config as { defaultPurpose?: string }).defaultPurpose;
      const body = await readBody(ctx.req, o.maxBodyBytes);
      const headers = cleanRequestHeaders(ctx.req.headers);
      // The key is the gateway's: a merchant that honours keys would replay its 402 to the paid retry.
      delete headers['idempotency-key'];
      const payload = body.length ? body : undefined;

      // With a key, this runs at most once per (session, key); a retry gets its stored answer.
      const keyed =
        key === undefined ? undefined : { sessionId: session.id, key, method, target: url.href, purpose, body };
      await o.idempotency.around(ctx, keyed, async () => {
        let res = await o.forwarder.send({ url, method, headers, body: payload });
        let receiptId: string | undefined;
        if (res.status === 402) {
          // The first protocol that recognises the 402 pays it; an unknown 402 passes through.
          for (const protocol of o.protocols) {
            const terms = protocol.detect(res);
            if (terms === undefined) continue;
            const asked = res.url;
            // One spelling per merchant for its globs, limits, velocity and receipts
            // (service-kit/host-name.ts); the forwarder's guard already refused a host that has none.
            const host = canonicalUrlHost(asked);
            if (host === undefined)
              throw new CtlError('target_not_allowed', `the target host '${asked.hostname}' is malformed`);
            const paid = await protocol
              .pay(terms, {
                session,
                host,
                purpose,
                retry: (extra) =>
                  o.forwarder.send({ url: asked, method, headers: { ...headers, ...extra }, body: payload }),
              })
              .catch((e) => {
                // Refused (and recorded) for want of a purpose: say both ways to give one.
                if (purpose === undefined && e instanceof CtlError && e.code === 'purpose_not_allowed')
                  throw new CtlError(
                    e.code,
                    "a paid request needs a purpose: send X-Ctl-Purpose, or set the session's defaultPurpose",
                  );
                throw e;
              });
            res = paid.response;
            receiptId = paid.receiptId;
            break;
          }
        }
        ctx.status = res.status;
        // The merchant's headers first (its X-Ctl-* dropped), then the gateway's own on top.
        for (const [k, v] of Object.entries(cleanResponseHeaders(res.headers))) ctx.set(k, v as string | string[]);
        ctx.set('X-Ctl-Session-Id', session.id);
        if (receiptId) ctx.set('X-Ctl-Receipt-Id', receiptId);
        if (receiptId) await setReceiptLogIndex(ctx, o.log, receiptId);
        ctx.body = res.body;
      });
    }),
  );
}
