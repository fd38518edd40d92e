/**
 * The gateway's Koa app (createGatewayApp): its middleware, outermost first, and its routes in the
 * order they are registered, each given the services it answers with.
 */
import Koa from 'koa';
import Router from '@koa/router';
import { errorMiddleware, requireScope, ADMIN_SCOPE } from '../service-kit/index.js';
import { serveOpenApi } from '../service-kit/openapi.js';
import { eventAdminRoutes } from '../service-kit/event-admin.js';
import { healthRoutes, serveRouter } from '../service-kit/service-routes.js';
import { GATEWAY_OPENAPI } from './openapi.js';
import type { KeyRing } from './keys/ring.js';
import type { Forwarder } from './net/forwarder.js';
import type { ConsoleStreams } from './console/stream.js';
import { sessionRoutes } from './routes/sessions.js';
import { proxyRoutes } from './routes/proxy.js';
import { agentSessionRoutes } from './routes/agent-session.js';
import { adminRoutes } from './routes/admin.js';
import { merchantRoutes } from './routes/merchant.js';
import { keyRoutes } from './routes/keys.js';
import { consoleRoutes, observeSessionWrites } from './routes/console.js';
import { caRoutes } from './egress/ca-routes.js';
import { STATUS_BY_CODE, type GatewayServices } from './app-services.js';
import type { GatewayRecord } from './app-log.js';
import type { GatewayCore, GatewayDeps } from './app-deps.js';

export interface HttpWiring {
  keys: KeyRing;
  /** /proxy's way out (app-outbound.ts). */
  forwarder: Forwarder;
  record: GatewayRecord;
  services: GatewayServices;
  consoleStreams: ConsoleStreams;
  /** The base URL written into grants and responses, never a request's Host (app.ts). */
  baseUrl: (ctx: Koa.Context) => string;
}

export function createHttpApp(deps: GatewayDeps, core: GatewayCore, wiring: HttpWiring): Koa {
  const { db, now, logger, issuer, ledger, metrics } = core;
  const { keys, forwarder, consoleStreams, baseUrl } = wiring;
  const { serviceLog, events, anchorSources, chain } = wiring.record;
  const { auth, sessions, protocols, idempotency, limits, egressCa } = wiring.services;

  const app = new Koa();
  app.proxy = false;
  app.use(metrics.middleware);
  // The agent can tell the gateway's own refusals from a merchant's response.
  app.use(async (ctx, next) => {
    await next();
    const b = ctx.body as { error?: { code?: unknown } } | undefined;
    if (b && typeof b === 'object' && !Buffer.isBuffer(b) && typeof b.error?.code === 'string')
      ctx.set('X-Ctl-Gateway-Error', b.error.code);
  });
  app.use(errorMiddleware({ logger, statusByCode: STATUS_BY_CODE }));

  const router = new Router();
  healthRoutes(router, {
    // The same checks as the authority's: the database, and the keys it signs with.
    ready: {
      database: () => db.ping(),
      keys: async () => Boolean((await keys.active('grant')) && (await keys.active('receipt'))),
    },
    metrics,
  });
  adminRoutes(router, { db, auth, keys, sessions, events, now });
  sessionRoutes(router, { db, auth, sessions, baseUrl, log: serviceLog?.log });
  proxyRoutes(router, {
    sessions,
    protocols,
    forwarder,
    now,
    maxBodyBytes: deps.maxBodyBytes ?? 1024 * 1024,
    idempotency,
    log: serviceLog?.log,
  });
  agentSessionRoutes(router, { db, sessions, log: serviceLog?.log });
  serviceLog?.routes(router, { receiptId: 'receipt:' });
  merchantRoutes(router, { db, ledger, now, baseUrl, limit: limits.charges });
  keyRoutes(router, { db, keys, issuer, now });
  consoleRoutes(router, { db, auth, sessions, streams: consoleStreams, dir: deps.console?.dir });
  eventAdminRoutes(router, {
    admin: requireScope(auth, ADMIN_SCOPE),
    audit: events.audit,
    dispatches: events.outbox.log,
    redeliver: (id) => events.outbox.redeliver(id),
    anchors: { outbox: chain, sources: anchorSources },
  });
  caRoutes(router, { auth, ca: egressCa });
  serveOpenApi(router, GATEWAY_OPENAPI);
  serveRouter(app, router, [observeSessionWrites(consoleStreams)]);
  return app;
}
