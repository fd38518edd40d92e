/**
 * service-kit's refusals of bad input, on a small real Koa app mounted like the services mount
 * theirs (errorMiddleware, requestGuard, routers): NUL in JSON, control characters in the path
 * and query, a body sent to a route that reads none, PostgreSQL's 22021 as the last line,
 * what Node's HTTP parser refuses (`Content-Length: -1`), and the Bearer scheme in any case.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import Koa from 'koa';
import Router from '@koa/router';
import {
  createApiKeyAuth,
  errorMiddleware,
  generateApiKey,
  jsonBody,
  listen,
  openDatabase,
  readsBody,
  requestGuard,
  requireScope,
  bearerToken,
  type Listening,
  type SqlDatabase,
} from '../../service-kit/index.js';
import { parseStrictJson } from '../../src/index.js';
import { PG_URL, dropSchema, freshSchema, pgAvailable } from './pg-fixture.js';
import { send } from './route-sweep.js';
import { rawHttp } from '../helpers/raw-http.js';

const logged: Array<{ level: string; obj: any }> = [];
const key = generateApiKey(['things:write']);
const auth = createApiKeyAuth({ findKey: (id) => (id === key.keyId ? key.record : undefined) });
let srv: Listening;
let pg: { db: SqlDatabase; schema: string } | undefined;

test.before(async () => {
  if (await pgAvailable()) {
    const schema = freshSchema();
    pg = { db: await openDatabase(PG_URL, { schema }), schema };
  } else console.log(`SKIPPED PostgreSQL 22021 mapping: ${PG_URL} is unreachable`);
  const r = new Router();
  const body = jsonBody({ limit: '4kb', parse: parseStrictJson });
  r.post('/echo', body, (ctx) => {
    ctx.body = { got: ctx.request.body ?? null };
  });
  r.get('/things/:id', (ctx) => {
    ctx.body = { id: ctx.params.id, q: ctx.query };
  });
  r.delete('/things/:id', (ctx) => {
    ctx.body = { deleted: ctx.params.id };
  });
  r.post('/rotate', requireScope(auth, 'things:write'), (ctx) => {
    ctx.body = { rotated: true, by: ctx.state.principal.keyId };
  });
  r.post(
    '/raw',
    readsBody(async (ctx) => {
      const chunks: Buffer[] = [];
      for await (const c of ctx.req) chunks.push(c as Buffer);
      ctx.body = { bytes: Buffer.concat(chunks).length };
    }),
  );
  r.get('/pg/bug', async (ctx) => {
    ctx.body = await pg!.db.get('SELECT * FROM no_such_table');
  });
  const app = new Koa();
  app.silent = true;
  app.use(
    errorMiddleware({
      logger: {
        error: (obj) => logged.push({ level: 'error', obj }),
        warn: (obj) => logged.push({ level: 'warn', obj }),
      },
    }),
  );
  app.use(requestGuard([r]));
  app.use(r.routes());
  app.use(r.allowedMethods());
  srv = await listen(app);
});
test.after(async () => {
  await srv.close();
  if (pg) {
    await pg.db.close();
    await dropSchema(pg.schema);
  }
});

const json = (r: { text: string }) => JSON.parse(r.text);
const refusal = (r: { status: number; text: string }) => [
  r.status,
  Object.keys(json(r)).join(),
  json(r).error?.code,
  json(r).error?.message,
];

test('a NUL in any JSON string or member name is 400 malformed naming the field', async () => {
  const cases: Array<[string, string]> = [
    ['{"label":"a\\u0000b"}', 'label'],
    ['{"budget":{"currency":"US\\u0000D"}}', 'budget.currency'],
    ['{"purposes":["api:x","api:\\u0000"]}', 'purposes[1]'],
    ['{"policy":{"a\\u0000":1}}', 'policy.a\\u0000'],
    ['"\\u0000"', 'body'],
  ];
  for (const [text, field] of cases) {
    assert.equal(
      refusal(await send(srv.url, 'POST', '/echo', {}, text)),
      [400, 'error', 'malformed', `${field}: must not contain U+0000 (NUL)`],
      text,
    );
  }
  // Other escapes, and a backslash followed by "u0000" as text, are ordinary data.
  assert.equal(json(await send(srv.url, 'POST', '/echo', {}, '{"a":"\\\\u0000 \\u0001 \\n"}')), {
    got: { a: '\\u0000 \u0001 \n' },
  });
});

test('control characters in the path or the query are 400 malformed, encoded or not', async () => {
  for (const path of ['/things/a%00b', '/things/%0a', '/things/%7F', '/things/x%1F']) {
    assert.equal(refusal(await send(srv.url, 'GET', path, {})).slice(0, 3), [400, 'error', 'malformed'], path);
  }
  for (const query of ['?a=%00', '?a%00=1', '?a=b%0d%0aX:1', '?a=%7f']) {
    const r = await send(srv.url, 'GET', `/things/1${query}`, {});
    assert.equal(
      refusal(r),
      [400, 'error', 'malformed', 'query: control characters (U+0000–U+001F, U+007F) are not allowed'],
      query,
    );
  }
  // Percent-encoded printable and non-ASCII text still passes.
  assert.equal(json(await send(srv.url, 'GET', '/things/caf%C3%A9%20x?q=%E2%82%AC+1', {})), {
    id: 'café x',
    q: { q: '€ 1' },
  });
});

test('a body sent to a route that reads none is 400 malformed; an empty body is none', async () => {
  const junk = await send(
    srv.url,
    'DELETE',
    '/things/1',
    { 'content-type': 'text/plain', 'content-length': '4' },
    'junk',
  );
  assert.equal(refusal(junk), [400, 'error', 'malformed', 'body: DELETE /things/1 takes no body']);
  assert.equal(refusal(await send(srv.url, 'GET', '/things/1', {}, '{}')).slice(0, 3), [400, 'error', 'malformed']);
  const chunked = await send(
    srv.url,
    'POST',
    '/rotate',
    { authorization: `Bearer ${key.apiKey}`, 'transfer-encoding': 'chunked' },
    '{"x":1}',
  );
  assert.equal(refusal(chunked).slice(0, 3), [400, 'error', 'malformed'], 'refused before the route runs');
  assert.equal(json(await send(srv.url, 'DELETE', '/things/1', { 'content-length': '0' })), { deleted: '1' });
  assert.equal(json(await send(srv.url, 'POST', '/rotate', { authorization: `Bearer ${key.apiKey}` })), {
    rotated: true,
    by: key.keyId,
  });
  // Routes that read a body keep it: JSON through jsonBody, any bytes through readsBody.
  assert.equal(json(await send(srv.url, 'POST', '/echo', {}, '{"a":1}')), { got: { a: 1 } });
  assert.equal(json(await send(srv.url, 'POST', '/raw', { 'content-type': 'application/octet-stream' }, 'abc\u0000')), {
    bytes: 4,
  });
  // No route: the body does not matter, the answer is the router's.
  assert.equal(refusal(await send(srv.url, 'DELETE', '/nowhere', {}, '{}')).slice(0, 3), [404, 'error', 'not_found']);
});

test('PostgreSQL refusing a NUL (22021) is 400 malformed, logged at warn; other database errors stay 500', async () => {
  if (!pg) return;
  logged.length = 0;
  // jsonBody would refuse this NUL first: parse with a parser that lets it through, as a missed guard would.
  const direct = await pg.db.get('SELECT ?::text AS v', ['a\u0000b']).then(
    () => 'stored',
    (e) => e.code,
  );
  assert.is(direct, '22021', 'the premise: PostgreSQL refuses NUL in text');
  const app = new Koa();
  app.silent = true;
  const r = new Router();
  r.post('/store', jsonBody({ parse: JSON.parse }), async () => {
    throw await pg!.db.get('SELECT ?::text AS v', ['a\u0000b']).catch((e) => e);
  });
  app.use(
    errorMiddleware({
      logger: {
        error: (obj) => logged.push({ level: 'error', obj }),
        warn: (obj) => logged.push({ level: 'warn', obj }),
      },
    }),
  );
  app.use(r.routes());
  const s = await listen(app);
  try {
    const res = await send(s.url, 'POST', '/store', {}, '{}');
    assert.equal(refusal(res).slice(0, 3), [400, 'error', 'malformed']);
    assert.equal(
      logged.map((l) => l.level),
      ['warn'],
    );
    assert.is(logged[0].obj.err.code, '22021');
  } finally {
    await s.close();
  }
  logged.length = 0;
  const bug = await send(srv.url, 'GET', '/pg/bug', {});
  assert.equal(refusal(bug), [500, 'error', 'internal', 'internal error']);
  assert.equal(
    logged.map((l) => l.level),
    ['error'],
    'a genuine bug is not hidden as a client error',
  );
});

test('what the HTTP parser refuses (Content-Length: -1, a bad header) gets the JSON envelope', async () => {
  for (const header of [
    'Content-Length: -1',
    'Content-Length: abc',
    'Content-Length: 1, 2',
    'Bad Header: x',
    'X-A: a\u0000b',
  ]) {
    const res = await rawHttp(srv.url, `POST /echo HTTP/1.1\r\nHost: x\r\n${header}\r\n\r\n`);
    const [head, body] = res.split('\r\n\r\n');
    assert.match(head, /^HTTP\/1\.1 400 /, header);
    assert.match(head, /\r\ncontent-type: application\/json/i, header);
    assert.equal(Object.keys(JSON.parse(body)), ['error'], header);
    assert.is(JSON.parse(body).error.code, 'malformed', header);
    assert.type(JSON.parse(body).error.message, 'string');
  }
});

test('the Bearer scheme is case-insensitive (RFC 9110 §11.1); the token is not', async () => {
  for (const scheme of ['Bearer', 'bearer', 'BEARER', 'bEaReR']) {
    assert.equal(
      json(await send(srv.url, 'POST', '/rotate', { authorization: `${scheme} ${key.apiKey}` })),
      { rotated: true, by: key.keyId },
      scheme,
    );
  }
  assert.is(bearerToken('Bearer   abc'), 'abc', 'one or more spaces (RFC 9110 §11.4: 1*SP)');
  assert.is(bearerToken('Bearerabc'), undefined);
  assert.is(bearerToken('Basic abc'), undefined);
  const wrongCase = key.apiKey.replace(/[a-z]/, (c) => c.toUpperCase());
  assert.is((await send(srv.url, 'POST', '/rotate', { authorization: `bearer ${wrongCase}` })).status, 401);
});

test.run();
