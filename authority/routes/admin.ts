/**
 * The multi-key admin API (spec §4.3): POST /admin/keys (the key is shown once),
 * DELETE /admin/keys/{keyId}, GET /admin/keys; GET /audit and /audit/verify; the webhook dispatch log
 * (the outbox: pending, delivered, failed = dead letter) and the redelivery of a dead letter.
 */
import type Router from '@koa/router';
import { badRequest, generateApiKey, notFound, requireScope } from '../../service-kit/index.js';
import { closedObject, identifier, required, text } from '../validate.js';
import { SCOPES, actorOf, type RouteDeps } from './context.js';

function scopesOf(value: unknown): string[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > SCOPES.length)
    throw badRequest(`scopes: a non-empty array of ${SCOPES.join(', ')}`);
  for (const s of value)
    if (!(SCOPES as readonly unknown[]).includes(s))
      throw badRequest(`scopes: unknown scope ${JSON.stringify(s).slice(0, 64)} (known: ${SCOPES.join(', ')})`);
  if (new Set(value).size !== value.length) throw badRequest('scopes: duplicates');
  return value as string[];
}

function count(value: unknown, field: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || !/^[0-9]{1,15}$/.test(value))
    throw badRequest(`${field}: must be a non-negative integer`);
  return Number(value);
}

export function adminRoutes(router: Router, d: RouteDeps): void {
  const admin = requireScope(d.authenticate, 'admin');

  router.post('/admin/keys', admin, d.body, async (ctx) => {
    const body = closedObject(ctx.request.body, 'body', ['scopes', 'label']);
    const scopes = scopesOf(required(body, 'scopes'));
    const label = text(required(body, 'label'), 'label', 200);
    const { keyId, apiKey, record } = generateApiKey(scopes);
    const createdAt = new Date(d.now()).toISOString();
    await d.store.putApiKey(
      { ...record, label, createdAt, createdBy: actorOf(ctx.state), revokedAt: null },
      d.audit.entry(actorOf(ctx.state), 'apikey.create', keyId, { scopes, label }),
    );
    ctx.status = 201;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { keyId, apiKey, scopes, label, createdAt };
  });

  router.get('/admin/keys', admin, async (ctx) => {
    const keys = await d.store.listApiKeys();
    ctx.body = { keys: keys.map(({ hash: _hash, ...k }) => k) };
  });

  router.delete('/admin/keys/:keyId', admin, async (ctx) => {
    const keyId = identifier(ctx.params['keyId'], 'keyId');
    const r = await d.store.revokeApiKey(
      keyId,
      new Date(d.now()).toISOString(),
      d.audit.entry(actorOf(ctx.state), 'apikey.revoke', keyId, {}, (x) => x.changed),
    );
    if (!r) throw notFound(`no API key '${keyId}'`);
    ctx.body = { keyId, revokedAt: r.revokedAt };
  });

  router.get('/audit', admin, async (ctx) => {
    const entries = await d.store.audit.list({
      afterSeq: count(ctx.query['afterSeq'], 'afterSeq', 0),
      limit: count(ctx.query['limit'], 'limit', 100),
    });
    ctx.body = {
      entries: entries.map((e) => ({ ...e, data: JSON.parse(e.data) })),
      next: entries.length ? entries[entries.length - 1].seq : null,
    };
  });

  router.get('/audit/verify', admin, async (ctx) => {
    ctx.body = await d.store.audit.verify();
  });

  router.get('/admin/webhooks/dispatches', admin, async (ctx) => {
    const status = ctx.query['status'];
    if (status !== undefined && status !== 'pending' && status !== 'delivered' && status !== 'failed') {
      throw badRequest('status: pending, delivered or failed');
    }
    ctx.body = {
      dispatches: await d.store.dispatchLog.list({ status, limit: count(ctx.query['limit'], 'limit', 100) }),
    };
  });

  // A dead letter (`failed`: attempts exhausted) sent again, with its webhook-id.
  router.post('/admin/webhooks/dispatches/:id/redeliver', admin, async (ctx) => {
    const id = identifier(ctx.params['id'], 'id');
    if (!d.outbox || !(await d.outbox.redeliver(id))) throw notFound(`no dead-lettered delivery '${id}'`);
    ctx.status = 202;
    ctx.body = { id, status: 'pending' };
  });
}
