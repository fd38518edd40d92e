/**
 * Refuses, before any route runs, what no route of these services can use: control characters
 * in the path or the query (NUL above all: PostgreSQL cannot store it in TEXT and answers 22021),
 * and a body sent to a route that reads none. Both are `400 malformed` (PROTOCOL.md §9).
 */
import type { Context, Middleware } from 'koa';
import type Router from '@koa/router';
import { badRequest } from './http-error.js';

/** Marks a middleware as the one that reads the request body (jsonBody does; /proxy reads raw bytes). */
export const READS_BODY: unique symbol = Symbol.for('ctl.service-kit.readsBody');

/**
 * Declares that `mw` consumes the request body, so `requestGuard` lets a body through to its route.
 * @example router.all('/proxy', readsBody(async (ctx) => forward(ctx.req)))
 */
export function readsBody<T extends Middleware<any, any>>(mw: T): T {
  (mw as unknown as Record<symbol, boolean>)[READS_BODY] = true;
  return mw;
}

/** A request carries a body when it declares a length > 0 or any transfer coding (RFC 9112 §6.1). */
export function hasBody(ctx: Context): boolean {
  return ctx.request.length > 0 || ctx.get('transfer-encoding') !== '';
}

// Percent-encoded or raw C0 controls and DEL. UTF-8 never encodes another character with these
// bytes, so matching the raw text finds exactly what decoding would produce.
const CONTROL = /%(?:[01][0-9a-f]|7f)|[\x00-\x1f\x7f]/i;

/**
 * Koa middleware; mount it after errorMiddleware and before the routers it is given.
 * @example app.use(requestGuard([router])); app.use(router.routes())
 */
export function requestGuard(routers: readonly Router<any, any>[]): Middleware {
  return async (ctx, next) => {
    if (CONTROL.test(ctx.path)) throw badRequest('path: control characters (U+0000–U+001F, U+007F) are not allowed');
    if (CONTROL.test(ctx.querystring))
      throw badRequest('query: control characters (U+0000–U+001F, U+007F) are not allowed');
    if (hasBody(ctx) && !routeReadsBody(routers, ctx))
      throw badRequest(`body: ${ctx.method} ${ctx.path.slice(0, 200)} takes no body`);
    return next();
  };
}

/** True when the route that will answer reads a body, or when no route matches (404/405 follow). */
function routeReadsBody(routers: readonly Router<any, any>[], ctx: Context): boolean {
  for (const router of routers) {
    const m = router.match(ctx.path, ctx.method);
    if (!m.route) continue;
    return m.pathAndMethod.some((layer) =>
      layer.stack.some((mw) => (mw as unknown as Record<symbol, unknown>)[READS_BODY] === true),
    );
  }
  return true;
}
