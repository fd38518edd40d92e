/**
 * The admin's view of the gateway's durable events: the hash-chained audit log (GET /admin/audit,
 * GET /admin/audit/verify) and the webhook outbox as the dispatch log (GET
 * /admin/webhooks/dispatches?status=pending|delivered|failed; `failed` is the dead letter),
 * with POST /admin/webhooks/dispatches/{id}/redeliver to send a dead letter again (same webhook-id).
 */
import Router from '@koa/router';
import { ADMIN_SCOPE, badRequest, notFound, requireScope, type Authenticate } from '../../service-kit/index.js';
import type { GatewayEvents } from '../services/events.js';

function count(value: unknown, field: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || !/^[0-9]{1,15}$/.test(value))
    throw badRequest(`${field}: must be a non-negative integer`);
  return Number(value);
}

export function eventAdminRoutes(o: { auth: Authenticate; events: GatewayEvents }) {
  const r = new Router();
  const admin = requireScope(o.auth, ADMIN_SCOPE);

  r.get('/admin/audit', admin, async (ctx) => {
    const entries = await o.events.audit.list({
      afterSeq: count(ctx.query['afterSeq'], 'afterSeq', 0),
      limit: count(ctx.query['limit'], 'limit', 100),
    });
    ctx.body = {
      entries: entries.map((e) => ({ ...e, data: JSON.parse(e.data) })),
      next: entries.length ? entries[entries.length - 1].seq : null,
    };
  });

  r.get('/admin/audit/verify', admin, async (ctx) => {
    ctx.body = await o.events.audit.verify();
  });

  r.get('/admin/webhooks/dispatches', admin, async (ctx) => {
    const status = ctx.query['status'];
    if (status !== undefined && status !== 'pending' && status !== 'delivered' && status !== 'failed')
      throw badRequest('status: pending, delivered or failed');
    ctx.body = {
      dispatches: await o.events.outbox.log.list({ status, limit: count(ctx.query['limit'], 'limit', 100) }),
    };
  });

  r.post('/admin/webhooks/dispatches/:id/redeliver', admin, async (ctx) => {
    const id = String(ctx.params['id']);
    if (!/^[A-Za-z0-9._:-]{1,200}$/.test(id)) throw badRequest('id: a dispatch id');
    if (!(await o.events.outbox.redeliver(id))) throw notFound(`no dead-lettered delivery '${id}'`);
    ctx.status = 202;
    ctx.body = { id, status: 'pending' };
  });
  return r;
}
