/**
 * The budget owner's console: the static single-page app at /console (built by
 * scripts/build-console.mjs), its live feed GET /console/events, and the
 * session's webhook dispatch log GET /sessions/{id}/webhooks. Everything else the page does goes
 * through the owner API as is (routes/sessions.ts), with the owner key as the bearer.
 *
 * The page is served with a Content-Security-Policy that allows nothing but this origin (no
 * inline script or style, no frames, no external fetch) and the usual hardening headers.
 */
import type Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import {
  requireScope,
  bearerToken,
  forbidden,
  badRequest,
  HttpError,
  type Authenticate,
  type SqlDatabase,
} from '../../service-kit/index.js';
import type { SessionService } from '../sessions/service.js';
import { OWNER_SCOPE, type OwnerPrincipal } from '../owners/auth.js';
import type { ConsoleStreams } from '../console/stream.js';
import { dispatchesOfSession } from '../sessions/dispatches.js';

export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const SECURITY_HEADERS: Record<string, string> = {
  'Content-Security-Policy': CONSOLE_CSP,
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
  'Permissions-Policy': 'camera=(), microphone=(), geolocation=(), payment=(), usb=()',
};

/** The files the build writes; nothing else under /console is served (no path from the request reaches the disk). */
export const ASSETS: Record<string, [file: string, type: string]> = {
  '/console': ['index.html', 'text/html; charset=utf-8'],
  '/console/': ['index.html', 'text/html; charset=utf-8'],
  '/console/console.js': ['console.js', 'text/javascript; charset=utf-8'],
  '/console/console.css': ['console.css', 'text/css; charset=utf-8'],
  '/console/favicon.svg': ['favicon.svg', 'image/svg+xml'],
};

/**
 * Where the build put the console: dist/console/ beside the ctl-gateway package's bundle
 * (dist/ctl-gateway.mjs), else build/console/ beside the compiled gateway (build/gateway/routes/console.js).
 */
export const DEFAULT_CONSOLE_DIR =
  ['./console/', '../../console/']
    .map((rel) => fileURLToPath(new URL(rel, import.meta.url)))
    .find((dir) => existsSync(join(dir, 'index.html'))) ?? fileURLToPath(new URL('../../console/', import.meta.url));

export function consoleRoutes(
  router: Router,
  o: {
    db: SqlDatabase;
    auth: Authenticate;
    sessions: SessionService;
    streams: ConsoleStreams;
    dir?: string;
  },
): void {
  const dir = o.dir ?? DEFAULT_CONSOLE_DIR;
  const owner = requireScope(o.auth, OWNER_SCOPE);
  const ownerId = (ctx: Context) => {
    const id = (ctx.state.principal as OwnerPrincipal).ownerId;
    if (!id) throw forbidden('the console is for budget owners: sign in with an owner key, not the admin key');
    return id;
  };
  const harden: Middleware = async (ctx, next) => {
    ctx.set(SECURITY_HEADERS);
    await next();
  };

  for (const [path, [file, type]] of Object.entries(ASSETS)) {
    router.get(path, harden, async (ctx) => {
      let bytes: Buffer;
      try {
        bytes = await readFile(join(dir, file));
      } catch {
        throw new HttpError(503, 'unavailable', 'the console is not built: run `npm run compile`');
      }
      ctx.type = type;
      ctx.set('Cache-Control', 'no-cache');
      ctx.body = bytes;
    });
  }

  // One stream per owner tab, bounded (console/stream.ts). fetch() streaming carries the
  // key in the Authorization header: never in the URL, where logs and history would keep it.
  router.get('/console/events', harden, owner, async (ctx) => {
    const id = ownerId(ctx);
    const opened = o.streams.open(ctx, id, bearerToken(ctx.get('authorization'))!);
    if (opened !== 'open') {
      ctx.set('Retry-After', '10');
      throw new HttpError(
        429,
        'rate_limited',
        opened === 'owner_cap'
          ? 'too many live streams for this owner: close another console tab'
          : 'this gateway instance serves as many live streams as it may: try again shortly',
      );
    }
  });

  router.get('/sessions/:id/webhooks', owner, async (ctx) => {
    const s = await o.sessions.owned(ownerId(ctx), ctx.params.id!);
    const limit = ctx.query.limit === undefined ? 100 : Number(ctx.query.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw badRequest('limit: an integer 1–500');
    ctx.body = {
      sessionId: s.id,
      webhookUrl: s.webhookUrl ?? undefined,
      dispatches: s.webhookUrl ? await dispatchesOfSession(o.db, s.id, s.webhookUrl, limit) : [],
    };
  });
}

/**
 * Creation and continuation change what the console shows but are not webhook events (spec §6):
 * told to the live feed from the API's own successful answers, whoever called (the console, a
 * script, the agent continuing with its session token).
 */
export function observeSessionWrites(streams: ConsoleStreams): Middleware {
  return async (ctx, next) => {
    await next();
    if (ctx.status >= 300 || !ctx.path.startsWith('/sessions')) return;
    const body = ctx.body as { sessionId?: unknown } | undefined;
    if (!body || typeof body !== 'object' || typeof body.sessionId !== 'string') return;
    if (ctx.method === 'POST' && ctx.path === '/sessions')
      streams.publish('session.created', { sessionId: body.sessionId });
    else if (ctx.method === 'PATCH' && /^\/sessions\/[^/]+$/.test(ctx.path))
      streams.publish('session.continued', { sessionId: body.sessionId });
  };
}
