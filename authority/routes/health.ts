/** GET /healthz (the process answers), GET /readyz (database and signing keys usable), GET /metrics. */
import type Router from '@koa/router';
import type { Metrics } from '../../service-kit/index.js';
import { readinessHandler } from '../../service-kit/readiness.js';
import type { RouteDeps } from './context.js';

export function healthRoutes(router: Router, d: RouteDeps, metrics: Metrics): void {
  router.get('/healthz', (ctx) => {
    ctx.body = { ok: true };
  });
  // The same shape as the gateway's: { status, checks: { database, keys } }.
  router.get(
    '/readyz',
    readinessHandler({
      database: () => d.store.ping(),
      // Both keys the authority signs with: grants, and the Trust Bundle root.
      keys: async () => Boolean((await d.keys.grantSigner()) && (await d.keys.rootSigner())),
    }),
  );
  router.get('/metrics', metrics.handler);
}
