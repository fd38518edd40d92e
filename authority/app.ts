/**
 * The policy authority's Koa app (spec §1 part 2, §4.3), built without listening: tests and the
 * server entry both use it. Dependencies are passed in (store, keys, clock), none are ambient.
 */
import Koa from 'koa';
import Router from '@koa/router';
import {
  createApiKeyAuth,
  createMetrics,
  requireScope,
  errorMiddleware,
  jsonBody,
  requestLogger,
  silentLogger,
  type Logger,
  type Metrics,
} from '../service-kit/index.js';
import { parseStrictJson } from '../src/index.js';
import { createAuditTrail, type AuditWebhooks } from './audit-trail.js';
import type { AnchorSource, ChainOutbox } from '../service-kit/anchor/index.js';
import type { KeyRing } from './keys.js';
import type { AuthorityStore } from './store/types.js';
import type { RouteDeps } from './routes/context.js';
import { policyRoutes } from './routes/policies.js';
import { grantRoutes } from './routes/grants.js';
import { revocationRoutes } from './routes/revocation.js';
import { keyRoutes } from './routes/keys.js';
import { trustBundleRoutes } from './routes/trust-bundles.js';
import { humanRoutes } from './routes/humans.js';
import { adminRoutes } from './routes/admin.js';
import { healthRoutes, serveRouter } from '../service-kit/service-routes.js';
import { trustRootRoutes } from './routes/trust-root.js';
import { createTrustRoot, type TrustRoot } from './trust-root.js';
import {
  authorityRateLimits,
  DEFAULT_AUTHORITY_RATE_LIMITS,
  type AuthorityRateLimits,
} from '../service-kit/service-limits.js';
import { authorityMetrics } from './business-metrics.js';
import { AUTHORITY_OPENAPI, AUTHORITY_LOG_REFS } from './openapi.js';
import { serveOpenApi } from '../service-kit/openapi.js';
import { eventAdminRoutes } from '../service-kit/event-admin.js';
import type { ServiceLog } from '../service-kit/tlog/index.js';

export interface AuthorityDeps {
  store: AuthorityStore;
  /** Initialised (`await keys.init()`). */
  keys: KeyRing;
  /** Initialised (`await trustRoot.init()`); default: one without a bundle key (the root signs until a rotation). */
  trustRoot?: TrustRoot;
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
  /** The outbox every audit entry is delivered through, and its endpoints. */
  webhooks?: AuditWebhooks;
  /** The chain outbox (anchors, revocation tokens) and the logs it anchors, for GET /admin/anchors. */
  chain?: ChainOutbox;
  anchorSources?: AnchorSource[];
  metrics?: Metrics;
  /**
   * Per API key and per client address (service-kit/service-limits.ts); default
   * DEFAULT_AUTHORITY_RATE_LIMITS, a missing entry is no limit.
   */
  rateLimits?: AuthorityRateLimits;
  /** The transparency log of grants, revocations and bundles (service-kit/tlog; server.ts starts its timer). */
  log?: ServiceLog;
}

/**
 * @example const app = createAuthorityApp({ store, keys, issuer: 'fleet.example', revocationBaseUrl:
 * 'https://a.example' })
 */
export function createAuthorityApp(deps: AuthorityDeps): Koa {
  const logger = deps.logger ?? silentLogger();
  const now = deps.now ?? Date.now;
  const metrics = deps.metrics ?? createMetrics({ prefix: 'ctl_authority_' });
  const limits = authorityRateLimits(
    deps.store,
    deps.rateLimits ?? DEFAULT_AUTHORITY_RATE_LIMITS,
    createApiKeyAuth({ findKey: (id) => deps.store.getApiKey(id), bootstrapKey: deps.adminApiKey }),
  );
  const routeDeps: RouteDeps = {
    store: deps.store,
    keys: deps.keys,
    trustRoot: deps.trustRoot ?? createTrustRoot({ store: deps.store, keys: deps.keys, logger, now }),
    audit: createAuditTrail({
      store: deps.store,
      webhooks: deps.webhooks,
      chain: deps.chain,
      logger,
      now,
      log: deps.log?.log,
    }),
    outbox: deps.webhooks?.outbox,
    issuer: deps.issuer,
    revocationBaseUrl: deps.revocationBaseUrl.replace(/\/+$/, ''),
    now,
    authenticate: limits.authenticate,
    // PROTOCOL.md §2: untrusted JSON goes through the strict I-JSON parser (duplicate keys refused).
    body: jsonBody({ limit: deps.bodyLimit ?? '64kb', parse: (t) => parseStrictJson(t) }),
    logger,
    maxBundleTtlMs: deps.maxBundleTtlMs ?? 30 * 86_400_000,
    counters: authorityMetrics(metrics.registry),
  };

  const router = new Router();
  healthRoutes(router, {
    // The same checks as the gateway's: the database, and both keys the authority signs with (grants,
    // the Trust Bundle root).
    ready: {
      database: () => deps.store.ping(),
      keys: async () => Boolean((await deps.keys.grantSigner()) && (await deps.keys.rootSigner())),
    },
    metrics,
  });
  policyRoutes(router, routeDeps);
  grantRoutes(router, routeDeps);
  revocationRoutes(router, routeDeps);
  keyRoutes(router, routeDeps);
  trustBundleRoutes(router, routeDeps);
  trustRootRoutes(router, routeDeps);
  adminRoutes(router, routeDeps);
  eventAdminRoutes(router, {
    admin: requireScope(routeDeps.authenticate, 'admin'),
    audit: deps.store.audit,
    dispatches: deps.store.dispatchLog,
    redeliver: async (id) => Boolean(routeDeps.outbox && (await routeDeps.outbox.redeliver(id))),
    // Where the authority served its audit log before both services shared one path.
    deprecatedAuditPath: '/audit',
    anchors: deps.chain && { outbox: deps.chain, sources: deps.anchorSources ?? [] },
  });
  humanRoutes(router, routeDeps);
  deps.log?.routes(router, AUTHORITY_LOG_REFS);
  serveOpenApi(router, AUTHORITY_OPENAPI);

  const app = new Koa();
  app.proxy = false;
  app.silent = true; // errors are answered and logged by errorMiddleware, never printed by Koa
  app.use(metrics.middleware);
  // The revocation check, JWKS and probes are high-volume reads: logged at debug (cheap).
  if (deps.logRequests !== false) {
    app.use(
      requestLogger(logger, {
        quietPaths: [
          '/revoke',
          '/.well-known/ctl-keys.json',
          '/trust-bundles',
          '/trust-root',
          '/healthz',
          '/readyz',
          '/metrics',
        ],
      }),
    );
  }
  app.use(errorMiddleware({ logger }));
  serveRouter(app, router, [limits.addresses]);
  return app;
}
