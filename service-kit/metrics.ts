/**
 * prom-client metrics on a registry of the app's own (two apps in one process, as in tests,
 * must not collide on the global registry): a request counter and a latency histogram labelled
 * by route pattern (never the raw path, whose cardinality a client controls), and prom-client's
 * process and Node.js defaults (process_cpu_seconds_total, nodejs_heap_size_used_bytes, …) without
 * a prefix, as every exporter names them.
 */
import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Middleware } from 'koa';

export interface Metrics {
  registry: Registry;
  /** Counts and times every request; mount it before (outside) the error middleware, so it sees final statuses. */
  middleware: Middleware;
  /** Serves the registry as `text/plain; version=0.0.4` (mount at GET /metrics). */
  handler: Middleware;
}

const withDefaults = new WeakSet<Registry>();

/** Process and Node.js metrics on `registry`, once (prom-client throws on a second registration). */
export function defaultMetricsOn(registry: Registry): void {
  if (withDefaults.has(registry)) return;
  withDefaults.add(registry);
  collectDefaultMetrics({ register: registry });
}

/**
 * @example const metrics = createMetrics({ prefix: 'ctl_authority_' }); app.use(metrics.middleware)
 */
export function createMetrics(options: { prefix: string; defaultMetrics?: boolean }): Metrics {
  const registry = new Registry();
  if (options.defaultMetrics !== false) defaultMetricsOn(registry);
  const requests = new Counter({
    name: `${options.prefix}http_requests_total`,
    help: 'HTTP requests by method, route pattern and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: `${options.prefix}http_request_duration_seconds`,
    help: 'HTTP request latency by method and route pattern',
    labelNames: ['method', 'route'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  const middleware: Middleware = async (ctx, next) => {
    const started = process.hrtime.bigint();
    try {
      await next();
    } finally {
      const route = (ctx as { _matchedRoute?: unknown })._matchedRoute;
      const label = typeof route === 'string' ? route : 'unmatched';
      requests.inc({ method: ctx.method, route: label, status: String(ctx.status) });
      latency.observe({ method: ctx.method, route: label }, Number(process.hrtime.bigint() - started) / 1e9);
    }
  };
  const handler: Middleware = async (ctx) => {
    ctx.set('Content-Type', registry.contentType);
    ctx.body = await registry.metrics();
  };
  return { registry, middleware, handler };
}
