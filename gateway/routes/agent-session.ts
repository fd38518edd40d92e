/**
 * Agent side, read only (spec §4.2 "Gateway, agent side"): what the holder of a session token may
 * know about its own session without the owner's key, so an agent (or the MCP server in mcp/) can
 * check its state and spend before paying and show the receipts of what it paid. The session is
 * the token's: there is no id in the path to guess, and another session's receipt is 404.
 */
import type Router from '@koa/router';
import type { Context } from 'koa';
import { notFound, unauthorized, type SqlDatabase } from '../../service-kit/index.js';
import { receiptOf, receiptsOf } from '../payments/store/payments.js';
import { receiptLogIndex } from '../log/entries.js';
import type { TransparencyLog } from '../../service-kit/tlog/index.js';
import { sessionById } from '../sessions/store.js';
import { sessionTokenOf, type SessionService } from '../sessions/service.js';

export function agentSessionRoutes(
  router: Router,
  o: { db: SqlDatabase; sessions: SessionService; log?: TransparencyLog },
): void {
  // Any state answers (a revoked or expired session says so): the agent learns why it cannot pay.
  async function tokenSession(ctx: Context) {
    const token = sessionTokenOf(ctx.get('authorization'));
    if (!token) throw unauthorized('a session token is required (Authorization: Bearer gw_sess_…)');
    const session = await o.sessions.byToken(token);
    if (!session) throw unauthorized('the session token is not valid');
    ctx.set('X-Ctl-Session-Id', session.id);
    ctx.set('Cache-Control', 'no-store');
    return session;
  }

  router.get('/session', async (ctx) => {
    // byToken's spend may be stale (it caches); the view reads the row as it is now.
    const s = await tokenSession(ctx);
    const now = (await sessionById(o.db, s.id)) ?? s;
    const windows = await o.sessions.windowsOf(now);
    ctx.body = { ...(await o.sessions.agentView(now)), ...(windows ? { windows } : {}) };
  });

  router.get('/session/receipts', async (ctx) => {
    const s = await tokenSession(ctx);
    const receipts = await receiptsOf(o.db, s.id);
    ctx.body = { sessionId: s.id, receipts, ...(await receiptLogIndex(o.log, receipts)) };
  });

  router.get('/session/receipts/:receiptId', async (ctx) => {
    const s = await tokenSession(ctx);
    const receipt = await receiptOf(o.db, s.id, ctx.params.receiptId!);
    if (!receipt) throw notFound(`no receipt '${ctx.params.receiptId}' in this session`);
    ctx.body = receipt;
  });
}
