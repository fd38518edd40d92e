/** GET /healthz (the process answers), GET /readyz (database and signing keys usable), GET /metrics. */
import type Router from '@koa/router';
import type { Metrics, SqlDatabase } from '../../service-kit/index.js';
import { readinessHandler } from '../../service-kit/readiness.js';
import type { KeyRing } from '../keys/ring.js';

export function healthRoutes(router: Router, o: { db: SqlDatabase; keys: KeyRing; metrics: Metrics }): void {
  router.get('/healthz', (ctx) => {
    ctx.body = { ok: true };
  });
  // The same shape as the authority's: { status, checks: { database, keys } }.
  router.get(
    '/readyz',
    readinessHandler({
      database: () => o.db.ping(),
      keys: async () => Boolean((await o.keys.active('grant')) && (await o.keys.active('receipt'))),
    }),
  );
  router.get('/metrics', o.metrics.handler);
}
