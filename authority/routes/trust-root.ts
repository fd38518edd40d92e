/**
 * The root chain (PROTOCOL.md §11): `GET /trust-root` → `{ statements }` for devices and the
 * refresh job to walk from their pinned root; `POST /trust-root` (admin) publishes the next
 * `ctl-root/1` statement, refused unless the chain plus it verifies as the next link.
 */
import type Router from '@koa/router';
import { requireScope } from '../../service-kit/index.js';
import { closedObject, required } from '../validate.js';
import { actorOf, type RouteDeps } from './context.js';

/** @example trustRootRoutes(router, routeDeps) */
export function trustRootRoutes(router: Router, d: RouteDeps): void {
  router.get('/trust-root', async (ctx) => {
    ctx.set('Cache-Control', 'public, max-age=30');
    ctx.body = { statements: await d.trustRoot.statements() };
  });

  router.post('/trust-root', requireScope(d.authenticate, 'admin'), d.body, async (ctx) => {
    const body = closedObject(ctx.request.body, 'body', ['statement']);
    const statement = required(body, 'statement');
    const actor = actorOf(ctx.state);
    const r = await d.trustRoot.publish(statement, actor, (q, v) =>
      d.audit.entry(actor, 'root.rotate', `root-v${v.rootVersion}`, v)(q, v),
    );
    ctx.status = r.changed ? 201 : 200;
    ctx.body = { ...r, statements: await d.trustRoot.statements() };
  });
}
