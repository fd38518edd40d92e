/**
 * What both services mount the same way: the health routes (GET /healthz, /readyz, /metrics) and
 * the handling of methods, so a probe, a scraper or a client sending OPTIONS or PROPFIND meets one
 * behaviour whichever service it asks.
 */
import type Koa from 'koa';
import type Router from '@koa/router';
import type { Middleware } from 'koa';
import { HttpError } from './http-error.js';
import type { Metrics } from './metrics.js';
import { readinessHandler, type ReadinessCheck } from './readiness.js';
import { requestGuard } from './request-guard.js';

/**
 * GET /healthz (the process answers), GET /readyz (`ready`'s checks, service-kit/readiness.ts:
 * `{ status, checks: { database, keys } }` in both services) and GET /metrics.
 * @example healthRoutes(router, { ready: { database: () => db.ping() }, metrics })
 */
export function healthRoutes(
  router: Router<any, any>,
  o: { ready: Record<string, ReadinessCheck>; metrics: Metrics },
): void {
  router.get('/healthz', (ctx) => {
    ctx.body = { ok: true };
  });
  router.get('/readyz', readinessHandler(o.ready));
  router.get('/metrics', o.metrics.handler);
}

/**
 * A method no route implements (PROPFIND, PURGE, …) is the caller's mistake, answered 405
 * `method_not_allowed` and logged with the request at info, not the router's 501 logged as a failure.
 */
const unknownMethod: Middleware = async (ctx, next) => {
  await next();
  if (ctx.status === 501 && ctx.body == null)
    throw new HttpError(405, 'method_not_allowed', `${ctx.method} is not a method this service answers`);
};

/**
 * Mounts `router` after the error middleware: unknown methods answered 405, the request guard
 * (service-kit/request-guard.ts), `beforeRoutes` (a rate limit…), the routes, then the router's
 * own answers: 405 with `Allow` for a known path's other methods, and OPTIONS.
 * @example app.use(errorMiddleware({ logger })); serveRouter(app, router, [limits.addresses])
 */
export function serveRouter(app: Koa<any, any>, router: Router<any, any>, beforeRoutes: Middleware[] = []): void {
  app.use(unknownMethod);
  app.use(requestGuard([router]));
  for (const mw of beforeRoutes) app.use(mw);
  app.use(router.routes());
  app.use(router.allowedMethods());
}
