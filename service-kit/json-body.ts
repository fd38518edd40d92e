/**
 * JSON request bodies with a size limit. @koa/bodyparser reads the bytes (and enforces the limit,
 * 413); the text is then parsed by the caller's parser, normally the SDK's `parseStrictJson`,
 * because PROTOCOL.md §2 rejects duplicate keys and other non-I-JSON input that `JSON.parse`
 * lets through.
 */
import { bodyParser } from '@koa/bodyparser';
import type { Middleware } from 'koa';
import { HttpError } from './http-error.js';

export interface JsonBodyOptions {
  /** Largest accepted body, bytes or a string like '64kb'. Default '64kb'. */
  limit?: number | string;
  /** Parses the body text; throws on bad input. Errors with a `code` keep it, others become `malformed`. */
  parse: (text: string) => unknown;
}

const JSON_TYPES = ['application/json', 'application/*+json'];

/**
 * Sets `ctx.request.body` to the parsed JSON value, or `undefined` when there is no body.
 * A body that is not JSON is `415 unsupported_media_type`; bad JSON is `400 malformed`.
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
  return async (ctx, next) => {
    const hasBody = ctx.request.length > 0 || ctx.get('transfer-encoding') !== '';
    if (!hasBody) {
      ctx.request.body = undefined;
      return next();
    }
    if (!ctx.request.is(JSON_TYPES)) throw new HttpError(415, 'unsupported_media_type', 'the body must be application/json');
    await read(ctx, async () => {});
    const text = ctx.request.body;
    if (typeof text !== 'string') throw new HttpError(415, 'unsupported_media_type', 'the body must be application/json');
    try {
      ctx.request.body = options.parse(text);
    } catch (e) {
      const code = (e as { code?: unknown })?.code;
      const message = e instanceof Error ? e.message : 'the body is not valid JSON';
      throw new HttpError(400, typeof code === 'string' ? code : 'malformed', `body: ${message}`);
    }
    return next();
  };
}
