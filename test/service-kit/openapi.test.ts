/**
 * The OpenAPI 3.1 documents of both services: valid (@readme/openapi-parser), committed as
 * generated, with the §9 code enum equal to the SDK's list, covering exactly the routes each app
 * registers (enumerated from its routers, both ways), and served at GET /openapi.json.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync } from 'node:fs';
import type Koa from 'koa';
import { validate, compileErrors } from '@readme/openapi-parser';
import { ERROR_CODES } from '../../src/index.js';
import { AUTHORITY_OPENAPI } from '../../authority/openapi.js';
import { GATEWAY_OPENAPI } from '../../gateway/openapi.js';
import type { OpenApiDocument } from '../../service-kit/openapi.js';
import { startTestAuthority } from '../authority/harness.js';
import { call, sqliteDb, startTestGateway } from '../gateway/helpers.js';
import { expectMatchesOpenApi } from '../helpers/openapi.js';
import { send } from './route-sweep.js';

const committed = (service: string) =>
  JSON.parse(readFileSync(new URL(`../../../${service}/openapi.json`, import.meta.url), 'utf8')) as OpenApiDocument;
const DOCS = { authority: AUTHORITY_OPENAPI, gateway: GATEWAY_OPENAPI } as const;

/**
 * The methods compared: HEAD is answered by the router for every GET (and documented only where
 * it is forwarded, /proxy); TRACE and the other methods `router.all` takes have no operation.
 */
const COMPARED = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/** `METHOD /path/{param}` of every layer of every router mounted on `app` (`:param` and a wildcard `*param`). */
function appRoutes(app: Koa<any, any>): Set<string> {
  const out = new Set<string>();
  for (const mw of app.middleware as unknown as Array<{
    router?: { stack: Array<{ methods: string[]; path: unknown }> };
  }>) {
    for (const layer of mw.router?.stack ?? []) {
      if (typeof layer.path !== 'string') continue;
      for (const m of layer.methods)
        if (COMPARED.includes(m)) out.add(`${m} ${layer.path.replace(/[:*]([A-Za-z0-9_]+)/g, '{$1}')}`);
    }
  }
  return out;
}

function documentedRoutes(doc: OpenApiDocument): Set<string> {
  return new Set(
    Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.keys(item)
        .map((m) => m.toUpperCase())
        .filter((m) => COMPARED.includes(m))
        .map((m) => `${m} ${path}`),
    ),
  );
}

function compareBothWays(app: Koa<any, any>, doc: OpenApiDocument) {
  const served = appRoutes(app);
  const documented = documentedRoutes(doc);
  assert.ok(served.size > 20, `${served.size} routes found on the app`);
  const missing = [...served].filter((r) => !documented.has(r));
  const extra = [...documented].filter((r) => !served.has(r));
  assert.equal(missing, [], `routes the app serves that the document lacks:\n${missing.join('\n')}`);
  assert.equal(extra, [], `documented routes the app does not serve:\n${extra.join('\n')}`);
}

for (const [service, doc] of Object.entries(DOCS)) {
  test(`${service}/openapi.json is valid OpenAPI 3.1 (@readme/openapi-parser)`, async () => {
    const result = await validate(structuredClone(committed(service)) as any);
    assert.ok(result.valid, compileErrors(result));
    assert.is(committed(service).openapi, '3.1.0');
  });

  test(`${service}/openapi.json is what scripts/gen-openapi.mjs writes from ${service}/openapi.ts`, () => {
    assert.equal(committed(service), JSON.parse(JSON.stringify(doc)), `stale: run node scripts/gen-openapi.mjs`);
  });

  test(`${service}: the error envelope's code enum is the SDK's ERROR_CODES (PROTOCOL.md §9)`, () => {
    const schemas = committed(service).components.schemas as Record<string, { enum?: string[] }>;
    assert.equal([...schemas['ErrorCode']!.enum!].sort(), [...ERROR_CODES].sort());
  });

  test(`${service}: every operation has a schema for each body it takes and answers`, () => {
    const gaps: string[] = [];
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        const body = op.requestBody as { content?: Record<string, { schema?: unknown }> } | undefined;
        if (body && Object.values(body.content ?? {}).some((m) => m.schema === undefined))
          gaps.push(`${method} ${path} request`);
        for (const [status, r] of Object.entries(op.responses)) {
          if ('$ref' in r || status === '204' || status === '304') continue; // no body by definition (RFC 9110)
          if (!r.content || Object.values(r.content).some((m) => m.schema === undefined))
            gaps.push(`${method} ${path} ${status}`);
        }
        if (!('4XX' in op.responses) || !('5XX' in op.responses)) gaps.push(`${method} ${path}: no error envelope`);
      }
    }
    assert.equal(gaps, []);
  });
}

test('the authority: every route it registers is documented, and nothing else', async () => {
  const t = await startTestAuthority();
  try {
    compareBothWays(t.authority.app, AUTHORITY_OPENAPI);
  } finally {
    await t.close();
  }
});

test('the gateway: every route it registers is documented, and nothing else', async () => {
  const db = sqliteDb();
  const gw = await startTestGateway(db);
  try {
    compareBothWays(gw.gw.app, GATEWAY_OPENAPI);
  } finally {
    await gw.close();
    await db.drop();
  }
});

test('the audit and webhook admin routes are at the same paths in both documents', () => {
  const eventPaths = (doc: OpenApiDocument) =>
    Object.entries(doc.paths)
      .filter(([p]) => p.startsWith('/admin/audit') || p.startsWith('/admin/webhooks'))
      .map(([p, item]) => `${Object.keys(item).join(',')} ${p}`)
      .sort();
  assert.equal(eventPaths(GATEWAY_OPENAPI), eventPaths(AUTHORITY_OPENAPI));
  assert.is(eventPaths(GATEWAY_OPENAPI).length, 4);
  // The authority's older path is documented, and only as deprecated.
  assert.is(AUTHORITY_OPENAPI.paths['/audit']?.get?.deprecated, true);
  assert.is(AUTHORITY_OPENAPI.paths['/audit/verify']?.get?.deprecated, true);
  assert.is(AUTHORITY_OPENAPI.paths['/admin/audit']?.get?.deprecated, undefined);
});

test('both services serve their document at GET /openapi.json: no credentials, JSON, cacheable', async () => {
  const t = await startTestAuthority();
  const db = sqliteDb();
  const gw = await startTestGateway(db);
  try {
    // Through the request helpers, so the answer is also checked against the document it is.
    const answers = {
      authority: await t.call('GET', '/openapi.json', undefined, null),
      gateway: await call(gw.url, 'GET', '/openapi.json'),
    };
    for (const [service, res] of Object.entries(answers)) {
      assert.is(res.status, 200, service);
      assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
      assert.match(res.headers.get('cache-control') ?? '', /max-age=\d+/);
      assert.equal(res.body, committed(service));
      const etag = res.headers.get('etag');
      assert.ok(etag, `${service}: an ETag`);
      // node:http: fetch adds `Cache-Control: no-cache` to a conditional request, which forbids a 304.
      const again = await send(service === 'authority' ? t.url : gw.url, 'GET', '/openapi.json', {
        'if-none-match': etag!,
      });
      assert.is(again.status, 304, `${service}: If-None-Match`);
      assert.is(again.text, '');
    }
  } finally {
    await gw.close();
    await db.drop();
    await t.close();
  }
});

test('expectMatchesOpenApi refuses what the document does not say', () => {
  const ok = { sessionId: 'sess_1', receipts: [] };
  expectMatchesOpenApi(GATEWAY_OPENAPI, 'GET', '/sessions/sess_1/receipts', 200, ok, 'application/json');
  const refused = (f: () => void, why: RegExp) => assert.throws(f, (e: Error) => why.test(e.message));
  refused(
    () =>
      expectMatchesOpenApi(
        GATEWAY_OPENAPI,
        'GET',
        '/sessions/sess_1/receipts',
        200,
        { ...ok, extra: 1 },
        'application/json',
      ),
    /does not match/,
  );
  refused(
    () => expectMatchesOpenApi(GATEWAY_OPENAPI, 'GET', '/sessions/sess_1/receipts', 201, ok, 'application/json'),
    /status not documented/,
  );
  refused(
    () => expectMatchesOpenApi(GATEWAY_OPENAPI, 'GET', '/nowhere', 200, {}, 'application/json'),
    /path not documented/,
  );
  refused(
    () =>
      expectMatchesOpenApi(
        AUTHORITY_OPENAPI,
        'GET',
        '/revoke?grantId=g',
        404,
        { error: { code: 'no_such_code', message: 'x' } },
        'application/json',
      ),
    /does not match/,
  );
  // An accepted request must be one the document allows; a refused one is not checked.
  refused(
    () =>
      expectMatchesOpenApi(GATEWAY_OPENAPI, 'POST', '/charge', 201, {}, 'application/json', {
        body: { amount: 100, currency: 'USD' },
      }),
    /request body/,
  );
  expectMatchesOpenApi(
    GATEWAY_OPENAPI,
    'POST',
    '/charge',
    400,
    { error: { code: 'malformed', message: 'amount' } },
    'application/json',
    { body: { amount: 100 } },
  );
  // A refusal on any route is the envelope, an unknown route's 404 included.
  expectMatchesOpenApi(
    AUTHORITY_OPENAPI,
    'GET',
    '/nowhere',
    404,
    { error: { code: 'not_found', message: 'no route' } },
    'application/json',
  );
});

test.run();
