/**
 * The multi-key admin API (spec §4.3): POST /admin/keys (the key is shown once),
 * DELETE /admin/keys/{keyId}, GET /admin/keys. The audit log and the webhook dispatch log are
 * service-kit/event-admin.ts, at the same paths as the gateway's.
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
}
