/**
 * Budget-owner side (spec §4.1): the session API, behind owner API keys (issue 4 §1).
 */
import Router from '@koa/router';
import { parseStrictJson } from '../../src/index.js';
import { jsonBody, requireScope, badRequest, type Authenticate, type SqlDatabase } from '../../service-kit/index.js';
import { listSessions } from '../store/sessions.js';
import { receiptsOf } from '../store/payments.js';
import type { SessionService } from '../services/sessions.js';
import { hashToken } from '../services/sessions.js';

export const OWNER_SCOPE = 'sessions';

export function sessionRoutes(o: { db: SqlDatabase; auth: Authenticate; sessions: SessionService; baseUrl: (ctx: any) => string }) {
  const r = new Router();
  const owner = requireScope(o.auth, OWNER_SCOPE);
  const body = jsonBody({ limit: '64kb', parse: parseStrictJson });
  const ownerId = (ctx: any) => ctx.state.principal.keyId as string;

  r.post('/sessions', owner, body, async (ctx) => {
    ctx.status = 201;
    ctx.body = await o.sessions.create(ownerId(ctx), ctx.request.body, o.baseUrl(ctx));
  });

  r.get('/sessions', owner, async (ctx) => {
    const limit = ctx.query.limit === undefined ? 50 : Number(ctx.query.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 200) throw badRequest('limit: an integer 1–200');
    let before: { createdAt: number; id: string } | undefined;
    if (typeof ctx.query.cursor === 'string') {
      const m = /^(\d{1,16})\.(sess_[A-Za-z0-9_-]{1,64})$/.exec(Buffer.from(ctx.query.cursor, 'base64url').toString('utf8'));
      if (!m) throw badRequest('cursor: not a cursor this API gave');
      before = { createdAt: Number(m[1]), id: m[2]! };
    }
    const rows = await listSessions(o.db, ownerId(ctx), limit + 1, before);
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    ctx.body = {
      sessions: page.map(o.sessions.view),
      ...(rows.length > limit && last ? { nextCursor: Buffer.from(`${last.createdAt}.${last.id}`).toString('base64url') } : {}),
    };
  });

  r.get('/sessions/:id', owner, async (ctx) => {
    ctx.body = o.sessions.view(await o.sessions.owned(ownerId(ctx), ctx.params.id!));
  });

  r.delete('/sessions/:id', owner, async (ctx) => {
    ctx.body = await o.sessions.revoke(await o.sessions.owned(ownerId(ctx), ctx.params.id!));
  });

  // The continuation token is the credential of its own (spec §5); the caller is the owner, or
  // the agent holding this session's token (the client's continueSession).
  r.patch('/sessions/:id', body, async (ctx) => {
    const bearer = /^Bearer (gw_sess_[A-Za-z0-9_-]{1,128})$/.exec(ctx.get('authorization'))?.[1];
    if (bearer) {
      const s = await o.sessions.byToken(bearer);
      if (!s || s.id !== ctx.params.id || s.tokenHash !== hashToken(bearer)) {
        ctx.status = 404;
        ctx.body = { error: { code: 'not_found', message: `no session '${ctx.params.id}'` } };
        return;
      }
      ctx.body = await o.sessions.continue(s, ctx.request.body, o.baseUrl(ctx));
      return;
    }
    await owner(ctx, async () => {
      ctx.body = await o.sessions.continue(await o.sessions.owned(ownerId(ctx), ctx.params.id!), ctx.request.body, o.baseUrl(ctx));
    });
  });

  r.get('/sessions/:id/receipts', owner, async (ctx) => {
    const s = await o.sessions.owned(ownerId(ctx), ctx.params.id!);
    ctx.body = { sessionId: s.id, receipts: await receiptsOf(o.db, s.id) };
  });

  return r;
}
