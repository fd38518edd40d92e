/**
 * OpenAPI 3.1 for the services: small builders both documents use (the error envelope of
 * PROTOCOL.md §9 on every operation, JSON bodies, bearer security) and the route serving a
 * document at `GET /openapi.json`. Each service's document is its own module
 * (authority/openapi.ts, gateway/openapi.ts); `node scripts/gen-openapi.mjs` writes it to the
 * service's openapi.json, kept in the repository.
 */
import type Router from '@koa/router';
import { createHash } from 'node:crypto';

/** A JSON Schema (2020-12, the dialect of OpenAPI 3.1). */
export type Schema = Record<string, unknown>;
export type OpenApiResponse =
  | { description: string; content?: Record<string, { schema: Schema }>; headers?: Record<string, unknown> }
  | { $ref: string };

export interface OpenApiOperation {
  summary: string;
  description?: string;
  tags?: string[];
  operationId?: string;
  /** Still answered, to be removed in a later release. */
  deprecated?: boolean;
  security?: Array<Record<string, string[]>>;
  parameters?: unknown[];
  requestBody?: unknown;
  responses: Record<string, OpenApiResponse>;
}

export interface OpenApiDocument {
  openapi: '3.1.0';
  jsonSchemaDialect: string;
  info: { title: string; version: string; description: string; license: { name: string; identifier: string } };
  paths: Record<string, Record<string, OpenApiOperation>>;
  components: {
    schemas: Record<string, Schema>;
    responses: Record<string, OpenApiResponse>;
    securitySchemes: Record<string, unknown>;
  };
  tags?: Array<{ name: string; description: string }>;
}

export const OPENAPI_PATH = '/openapi.json';

/** `$ref` to a component schema. */
export const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });
/** A closed object: every listed property typed, `required` the ones that are always there. */
export const object = (properties: Record<string, Schema>, required: string[] = [], extra: Schema = {}): Schema => ({
  type: 'object',
  properties,
  ...(required.length ? { required } : {}),
  additionalProperties: false,
  ...extra,
});
export const string = (extra: Schema = {}): Schema => ({ type: 'string', ...extra });
/** A decimal string of minor units (PROTOCOL.md §2: amounts are strings, never numbers). */
export const minorUnits = (description?: string): Schema => ({
  type: 'string',
  pattern: '^(0|[1-9][0-9]*)$',
  ...(description ? { description } : {}),
});
/** An RFC 3339 timestamp in UTC (PROTOCOL.md §2). */
export const timestamp = (description?: string): Schema => ({
  type: 'string',
  format: 'date-time',
  ...(description ? { description } : {}),
});
export const array = (items: Schema, extra: Schema = {}): Schema => ({ type: 'array', items, ...extra });

/** A JSON response with `schema`. */
export const jsonResponse = (
  description: string,
  schema: Schema,
  headers?: Record<string, unknown>,
): OpenApiResponse => ({
  description,
  content: { 'application/json': { schema } },
  ...(headers ? { headers } : {}),
});

/** A JSON request body (required unless said otherwise). */
export const jsonBodyOf = (schema: Schema, required = true) => ({
  required,
  content: { 'application/json': { schema } },
});

export const pathParam = (name: string, description: string, schema: Schema = { type: 'string' }) => ({
  name,
  in: 'path',
  required: true,
  description,
  schema,
});
export const queryParam = (
  name: string,
  description: string,
  schema: Schema = { type: 'string' },
  required = false,
) => ({ name, in: 'query', required, description, schema });

/** Every operation may refuse: any 4xx or 5xx is the §9 envelope (operations add their own statuses on top). */
const ERROR_RESPONSES = {
  '4XX': { $ref: '#/components/responses/Error' },
  '5XX': { $ref: '#/components/responses/Error' },
} as const;

/** An operation whose refusals are the §9 envelope; `security: []` is a public route. */
export function operation(o: OpenApiOperation): OpenApiOperation {
  return {
    ...o,
    responses: {
      ...o.responses,
      '4XX': o.responses['4XX'] ?? ERROR_RESPONSES['4XX'],
      '5XX': o.responses['5XX'] ?? ERROR_RESPONSES['5XX'],
    },
  };
}

/** `GET /openapi.json` itself, for each document's `paths`. */
export const openApiPathItem = (title: string) => ({
  get: operation({
    summary: `This OpenAPI 3.1 document (${title})`,
    tags: ['meta'],
    operationId: 'getOpenApi',
    security: [],
    responses: {
      200: jsonResponse(
        'The document',
        { type: 'object', required: ['openapi', 'info', 'paths'] },
        { ETag: { schema: { type: 'string' } }, 'Cache-Control': { schema: { type: 'string' } } },
      ),
      304: { description: 'Not modified (`If-None-Match` named the current ETag)' },
    },
  }),
});

/**
 * A document with the shared components: `Error`, the envelope every refusal uses, whose
 * `code` enum is `errorCodes` (PROTOCOL.md §9: pass the SDK's ERROR_CODES, never a copy).
 */
export function openApiDocument(o: {
  title: string;
  version: string;
  description: string;
  errorCodes: readonly string[];
  paths: OpenApiDocument['paths'];
  schemas: Record<string, Schema>;
  securitySchemes: Record<string, unknown>;
  tags: Array<{ name: string; description: string }>;
}): OpenApiDocument {
  return {
    openapi: '3.1.0',
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    info: {
      title: o.title,
      version: o.version,
      description: o.description,
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    tags: o.tags,
    paths: o.paths,
    components: {
      schemas: {
        ErrorCode: {
          type: 'string',
          description: 'PROTOCOL.md §9: codes are API (added, never renamed).',
          enum: [...o.errorCodes],
        },
        Error: object(
          {
            error: object(
              {
                code: ref('ErrorCode'),
                message: string(),
                resetsAt: string({
                  format: 'date-time',
                  description: 'With `window_exceeded`: when the full window ends (PROTOCOL.md §13)',
                }),
              },
              ['code', 'message'],
            ),
          },
          ['error'],
        ),
        ...o.schemas,
      },
      responses: { Error: jsonResponse('A refusal: `{ error: { code, message } }` (PROTOCOL.md §9)', ref('Error')) },
      securitySchemes: o.securitySchemes,
    },
  };
}

/**
 * Serves `doc` at GET /openapi.json: no credentials (it describes, never grants), cacheable
 * (`If-None-Match` with its ETag answers 304).
 * @example serveOpenApi(router, AUTHORITY_OPENAPI)
 */
export function serveOpenApi(router: Router<any, any>, doc: OpenApiDocument): void {
  const text = JSON.stringify(doc);
  const etag = `"${createHash('sha256').update(text).digest('base64url').slice(0, 27)}"`;
  router.get(OPENAPI_PATH, (ctx) => {
    ctx.set('Cache-Control', 'public, max-age=300');
    ctx.set('ETag', etag);
    ctx.status = 200;
    if (ctx.fresh) {
      ctx.status = 304;
      return;
    }
    ctx.type = 'application/json';
    ctx.body = text;
  });
}
