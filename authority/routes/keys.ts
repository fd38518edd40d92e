/**
 * GET /.well-known/ctl-keys.json (spec §4.3, PROTOCOL.md §4 JWKS) and POST /admin/keys/rotate.
 * Retired keys stay published while a grant they signed has not expired, and never sign again.
 */
import type Router from '@koa/router';
import { requireScope } from '../../service-kit/index.js';
import { actorOf, type RouteDeps } from './context.js';

export function keyRoutes(router: Router, d: RouteDeps): void {
  router.get('/.well-known/ctl-keys.json', async (ctx) => {
    ctx.set('Cache-Control', 'public, max-age=60');
    ctx.body = { keys: await d.keys.publishedGrantKeys(d.now()) };
  });

  router.post('/admin/keys/rotate', requireScope(d.authenticate, 'admin'), async (ctx) => {
    const actor = actorOf(ctx.state);
    const r = await d.keys.rotateGrantKey((q, rotated) =>
      d.audit.entry(actor, 'key.rotate', rotated.kid, { retired: rotated.retired })(q, rotated),
    );
    ctx.status = 201;
    ctx.body = r;
  });
}
