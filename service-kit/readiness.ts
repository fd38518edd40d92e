/**
 * GET /readyz for both services, one shape: `{ status: 'ok' | 'unavailable', checks: { database,
 * keys, … } }` with each check `'ok'` or `'failed'`; 200 when every check passes, 503 otherwise,
 * so a load balancer reads the status and an operator reads which dependency is down.
 */
import type { Middleware } from 'koa';

/** One dependency: true when usable. A throw or a hang past the timeout counts as failed. */
export type ReadinessCheck = () => Promise<boolean> | boolean;

export interface ReadinessBody {
  status: 'ok' | 'unavailable';
  checks: Record<string, 'ok' | 'failed'>;
}

async function passes(check: ReadinessCheck, timeoutMs: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<boolean>((r) => (timer = setTimeout(() => r(false), timeoutMs)));
  try {
    return await Promise.race([
      Promise.resolve()
        .then(check)
        .then(
          (ok) => ok === true,
          () => false,
        ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs every check at once. @example await readiness({ database: () => db.ping() }) */
export async function readiness(checks: Record<string, ReadinessCheck>, timeoutMs = 2000): Promise<ReadinessBody> {
  const names = Object.keys(checks);
  const results = await Promise.all(names.map((n) => passes(checks[n]!, timeoutMs)));
  const body: ReadinessBody = { status: results.every(Boolean) ? 'ok' : 'unavailable', checks: {} };
  names.forEach((n, i) => (body.checks[n] = results[i] ? 'ok' : 'failed'));
  return body;
}

/**
 * The handler. @example router.get('/readyz', readinessHandler({ database: () => db.ping(), keys: async () => !!(await
 * keys.active('grant')) }))
 */
export function readinessHandler(checks: Record<string, ReadinessCheck>, timeoutMs?: number): Middleware {
  return async (ctx) => {
    const body = await readiness(checks, timeoutMs);
    ctx.status = body.status === 'ok' ? 200 : 503;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = body;
  };
}
