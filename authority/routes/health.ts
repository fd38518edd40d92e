/** GET /healthz (the process answers), GET /readyz (the database answers), GET /metrics. */
import type Router from '@koa/router';
import { HttpError, type Metrics } from '../../service-kit/index.js';
import type { RouteDeps } from './context.js';

export function healthRoutes(router: Router, d: RouteDeps, metrics: Metrics): void {
  router.get('/healthz', (ctx) => {
    ctx.body = { ok: true };
  });
  router.get('/readyz', async (ctx) => {
    if (!(await d.store.ping())) throw new HttpError(503, 'unavailable', 'the database does not answer');
    ctx.body = { ready: true };
  });
  router.get('/metrics', metrics.handler);
}
