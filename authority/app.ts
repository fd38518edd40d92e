/**
 * The policy authority's Koa app (spec §1 part 2, §4.3), built without listening: tests and the
 * server entry both use it. Dependencies are passed in (store, keys, clock), none are ambient.
 */
import Koa from 'koa';
import Router from '@koa/router';
import {
  createApiKeyAuth, createMetrics, errorMiddleware, jsonBody, requestLogger, silentLogger,
  type Logger, type Metrics, type WebhookDispatcher,
} from '../service-kit/index.js';
import { parseStrictJson } from '../src/index.js';
import { createAuditTrail } from './audit-trail.js';
import type { AnchorQueue } from './anchor.js';
import type { KeyRing } from './keys.js';
import type { AuthorityStore } from './store/types.js';
import type { RouteDeps } from './routes/context.js';
import { policyRoutes } from './routes/policies.js';
import { grantRoutes } from './routes/grants.js';
import { revocationRoutes } from './routes/revocation.js';
import { keyRoutes } from './routes/keys.js';
import { trustBundleRoutes } from './routes/trust-bundles.js';
import { adminRoutes } from './routes/admin.js';
import { healthRoutes } from './routes/health.js';

export interface AuthorityDeps {
  store: AuthorityStore;
  /** Initialised (`await keys.init()`). */
  keys: KeyRing;
  issuer: string;
  revocationBaseUrl: string;
  /** CTL_ADMIN_API_KEY */
  adminApiKey?: string;
  logger?: Logger;
  /** Log one line per request (default true). */
  logRequests?: boolean;
  now?: () => number;
  /** Largest JSON body (default '64kb'). */
  bodyLimit?: string | number;
  /** Longest Trust Bundle lifetime (default 30 days). */
  maxBundleTtlMs?: number;
  webhooks?: WebhookDispatcher;
  anchors?: AnchorQueue;
  metrics?: Metrics;
}

/**
 * @example const app = createAuthorityApp({ store, keys, issuer: 'fleet.example', revocationBaseUrl: 'https://a.example' })
 */
export function createAuthorityApp(deps: AuthorityDeps): Koa {
  const logger = deps.logger ?? silentLogger();
  const now = deps.now ?? Date.now;
  const metrics = deps.metrics ?? createMetrics({ prefix: 'ctl_authority_' });
  const routeDeps: RouteDeps = {
    store: deps.store,
    keys: deps.keys,
    audit: createAuditTrail({ store: deps.store, webhooks: deps.webhooks, anchors: deps.anchors, logger, now }),
    issuer: deps.issuer,
    revocationBaseUrl: deps.revocationBaseUrl.replace(/\/+$/, ''),
    now,
    authenticate: createApiKeyAuth({ findKey: (id) => deps.store.getApiKey(id), bootstrapKey: deps.adminApiKey }),
    // PROTOCOL.md §2: untrusted JSON goes through the strict I-JSON parser (duplicate keys refused).
    body: jsonBody({ limit: deps.bodyLimit ?? '64kb', parse: (t) => parseStrictJson(t) }),
    logger,
    maxBundleTtlMs: deps.maxBundleTtlMs ?? 30 * 86_400_000,
  };

  const router = new Router();
  healthRoutes(router, routeDeps, metrics);
  policyRoutes(router, routeDeps);
  grantRoutes(router, routeDeps);
  revocationRoutes(router, routeDeps);
  keyRoutes(router, routeDeps);
  trustBundleRoutes(router, routeDeps);
  adminRoutes(router, routeDeps);

  const app = new Koa();
  app.proxy = false;
  app.silent = true; // errors are answered and logged by errorMiddleware, never printed by Koa
  app.use(metrics.middleware);
  // The revocation check, JWKS and probes are high-volume reads: logged at debug (issue 3 §2: cheap).
  if (deps.logRequests !== false) {
    app.use(requestLogger(logger, { quietPaths: ['/revoke', '/.well-known/ctl-keys.json', '/trust-bundles', '/healthz', '/readyz', '/metrics'] }));
  }
  app.use(errorMiddleware({ logger }));
  app.use(router.routes());
  app.use(router.allowedMethods());
  return app;
}
