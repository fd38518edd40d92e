/**
 * Budget-owner side (spec §4.1): the session API, behind owner API keys.
 */
import type Router from '@koa/router';
import { parseStrictJson } from '../../src/index.js';
import {
  jsonBody,
  requireScope,
  badRequest,
  forbidden,
  notFound,
  unauthorized,
  type Authenticate,
  type SqlDatabase,
} from '../../service-kit/index.js';
import { listSessions, type SessionRecord } from '../sessions/store.js';
import { receiptsOf } from '../payments/store/payments.js';
import { receiptLogIndex } from '../log/entries.js';
import type { TransparencyLog } from '../../service-kit/tlog/index.js';
import type { SessionService } from '../sessions/service.js';
import { hashToken, sessionTokenOf } from '../sessions/service.js';
import { OWNER_SCOPE, type OwnerPrincipal } from '../owners/auth.js';

/**
 * One page of an owner's sessions, newest first (`?limit` 1–200, default 50; `?cursor` the
 * `nextCursor` of the previous page): for the owner at GET /sessions and the admin at
 * GET /admin/owners/{ownerId}/sessions.
 */
export async function sessionsPage(
  db: SqlDatabase,
  sessions: SessionService,
  ownerId: string,
  query: Record<string, unknown>,
) {
  const limit = query.limit === undefined ? 50 : Number(query.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 200) throw badRequest('limit: an integer 1–200');
  let before: { createdAt: number; id: string } | undefined;
  if (typeof query.cursor === 'string') {
    const m = /^(\d{1,16})\.(sess_[A-Za-z0-9_-]{1,64})$/.exec(Buffer.from(query.cursor, 'base64url').toString('utf8'));
    if (!m) throw badRequest('cursor: not a cursor this API gave');
    before = { createdAt: Number(m[1]), id: m[2]! };
  }
  const rows = await listSessions(db, ownerId, limit + 1, before);
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return {
    sessions: await sessions.views(page),
    ...(rows.length > limit && last
      ? { nextCursor: Buffer.from(`${last.createdAt}.${last.id}`).toString('base64url') }
      : {}),
  };
}

export function sessionRoutes(
  router: Router,
  o: {
    db: SqlDatabase;
    auth: Authenticate;
    sessions: SessionService;
    baseUrl: (ctx: any) => string;
    /** The gateway's transparency log: each listed receipt's index (`logIndex`, by receipt id). */
    log?: TransparencyLog;
  },
): void {
  const owner = requireScope(o.auth, OWNER_SCOPE);
  const body = jsonBody({ limit: '64kb', parse: parseStrictJson });
  // Sessions belong to the owner, not to the key that made them (any of its keys reaches them).
  const ownerId = (ctx: any) => {
    const id = (ctx.state.principal as OwnerPrincipal).ownerId;
    if (!id)
      throw forbidden(
        'sessions belong to budget owners: use an owner key (the admin stops sessions at DELETE /admin/sessions/{id})',
      );
    return id;
  };

  router.post('/sessions', owner, body, async (ctx) => {
    ctx.status = 201;
    ctx.body = await o.sessions.create(ownerId(ctx), ctx.request.body, o.baseUrl(ctx));
  });

  // The Human-Agent profile: a session key for a person to sign a grant for (sessions/human.ts).
  router.post('/sessions/human/keys', owner, async (ctx) => {
    ctx.status = 201;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = await o.sessions.prepareHumanKey(ownerId(ctx));
  });

  router.get('/sessions', owner, async (ctx) => {
    ctx.body = await sessionsPage(o.db, o.sessions, ownerId(ctx), ctx.query);
  });

  router.get('/sessions/:id', owner, async (ctx) => {
    ctx.body = await o.sessions.detail(await o.sessions.owned(ownerId(ctx), ctx.params.id!));
  });

  router.delete('/sessions/:id', owner, async (ctx) => {
    ctx.body = await o.sessions.revoke(await o.sessions.owned(ownerId(ctx), ctx.params.id!), 'owner');
  });

  // The continuation token is the credential of its own (spec §5); the caller is the owner, or
  // the agent holding this session's token (the client's continueSession).
  router.patch('/sessions/:id', body, async (ctx) => {
    const bearer = sessionTokenOf(ctx.get('authorization'));
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
      ctx.body = await o.sessions.continue(
        await o.sessions.owned(ownerId(ctx), ctx.params.id!),
        ctx.request.body,
        o.baseUrl(ctx),
      );
    });
  });

  // A sub-agent's session (PROTOCOL.md §14): authorised by this session's own token, never the owner's key.
  // The token is checked before the body is read: a bad token is 401 whatever it sends.
  const sessionToken = async (ctx: any, next: () => Promise<unknown>) => {
    const bearer = sessionTokenOf(ctx.get('authorization'));
    if (!bearer) throw unauthorized("this session's token is required (Authorization: Bearer gw_sess_…)");
    const s = await o.sessions.byToken(bearer);
    if (!s) throw unauthorized('the session token is not valid');
    ctx.state.session = s;
    return next();
  };
  router.post('/sessions/:id/children', sessionToken, body, async (ctx) => {
    const s = ctx.state.session as SessionRecord;
    if (s.id !== ctx.params.id) throw notFound(`no session '${ctx.params.id}' for this token`);
    const stop = await o.sessions.ancestorStop(s);
    if (stop) throw stop;
    ctx.status = 201;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = await o.sessions.createChild(s, ctx.request.body, o.baseUrl(ctx));
  });

  router.get('/sessions/:id/tree', owner, async (ctx) => {
    ctx.body = await o.sessions.tree(await o.sessions.owned(ownerId(ctx), ctx.params.id!));
  });

  // `?descendants=true`: also every receipt of the sessions below it, the payments its spend counts
  // (PROTOCOL.md §14); each receipt names the session that paid.
  router.get('/sessions/:id/receipts', owner, async (ctx) => {
    const below = ctx.query.descendants;
    if (below !== undefined && below !== 'true' && below !== 'false') throw badRequest('descendants: true or false');
    const s = await o.sessions.owned(ownerId(ctx), ctx.params.id!);
    const receipts = await receiptsOf(o.db, s.id, below === 'true' ? { ownerId: s.ownerId } : undefined);
    ctx.body = { sessionId: s.id, receipts, ...(await receiptLogIndex(o.log, receipts)) };
  });
}
