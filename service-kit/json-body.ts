/**
 * JSON request bodies with a size limit. @koa/bodyparser reads the bytes (and enforces the limit,
 * 413); the text is then parsed by the caller's parser, normally the SDK's `parseStrictJson`,
 * because PROTOCOL.md §2 rejects duplicate keys and other non-I-JSON input that `JSON.parse`
 * lets through.
 */
import { bodyParser } from '@koa/bodyparser';
import type { Middleware } from 'koa';
import { HttpError, badRequest } from './http-error.js';
import { hasBody, readsBody } from './request-guard.js';

export interface JsonBodyOptions {
  /** Largest accepted body, bytes or a string like '64kb'. Default '64kb'. */
  limit?: number | string;
  /** Parses the body text; throws on bad input. Errors with a `code` keep it, others become `malformed`. */
  parse: (text: string) => unknown;
}

const JSON_TYPES = ['application/json', 'application/*+json'];

/**
 * Sets `ctx.request.body` to the parsed JSON value, or `undefined` when there is no body.
 * A body that is not JSON is `415 unsupported_media_type`; bad JSON, or a NUL in any string or
 * member name, is `400 malformed`.
 * @example router.post('/grants', jsonBody({ limit: '64kb', parse: parseStrictJson }), handler)
 */
export function jsonBody(options: JsonBodyOptions): Middleware {
  // Everything JSON is read as text (lodash.merge replaces text/plain by our list), so the
  // strict parser sees the exact bytes.
  const read = bodyParser({
    enableTypes: ['text'],
    extendTypes: { text: JSON_TYPES },
    textLimit: options.limit ?? '64kb',
    parsedMethods: ['POST', 'PUT', 'PATCH', 'DELETE'],
  });
  return readsBody(async (ctx, next) => {
    if (!hasBody(ctx)) {
      ctx.request.body = undefined;
      return next();
    }
    if (!ctx.request.is(JSON_TYPES))
      throw new HttpError(415, 'unsupported_media_type', 'the body must be application/json');
    await read(ctx, async () => {});
    const text = ctx.request.body;
    if (typeof text !== 'string')
      throw new HttpError(415, 'unsupported_media_type', 'the body must be application/json');
    try {
      ctx.request.body = options.parse(text);
    } catch (e) {
      const code = (e as { code?: unknown })?.code;
      const message = e instanceof Error ? e.message : 'the body is not valid JSON';
      throw new HttpError(400, typeof code === 'string' ? code : 'malformed', `body: ${message}`);
    }
    const nul = nulPath(ctx.request.body, '');
    if (nul !== undefined) throw badRequest(`${nul || 'body'}: must not contain U+0000 (NUL)`);
    return next();
  });
}

/**
 * The field (`label`, `budget.currency`, `purposes[2]`; '' for the body itself) holding the first
 * NUL of a parsed JSON value, in a string or a member name, or undefined. No field of either
 * service may hold one, and PostgreSQL cannot store it in TEXT (22021).
 */
function nulPath(value: unknown, at: string): string | undefined {
  if (typeof value === 'string') return value.includes('\0') ? at : undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = nulPath(value[i], `${at}[${i}]`);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      const name = `${at ? `${at}.` : ''}${k.slice(0, 64).replace(/\0/g, '\\u0000')}`;
      if (k.includes('\0')) return name;
      const found = nulPath(v, name);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}
