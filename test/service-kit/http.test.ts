/** Error middleware, JSON body limit, API-key auth, metrics and listen, on a small real Koa app. */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import Koa from 'koa';
import Router from '@koa/router';
import {
  HttpError,
  apiKeyMatches,
  createApiKeyAuth,
  createMetrics,
  describeError,
  errorMiddleware,
  generateApiKey,
  hashApiKey,
  jsonBody,
  listen,
  requireScope,
  type ApiKeyRecord,
  type Listening,
} from '../../service-kit/index.js';
import { CtlBudgetExceededError, CtlError, parseStrictJson } from '../../src/index.js';

const logged: Array<{ obj: any; msg?: string }> = [];
const keys = new Map<string, ApiKeyRecord>();
const writer = generateApiKey(['things:write']);
const admin = generateApiKey(['admin']);
keys.set(writer.keyId, writer.record);
keys.set(admin.keyId, admin.record);
const auth = createApiKeyAuth({ findKey: (id) => keys.get(id), bootstrapKey: 'bootstrap-key-0123456789' });
let srv: Listening;
const metrics = createMetrics({ prefix: 'kit_' });

test.before(async () => {
  const r = new Router();
  r.post('/echo', jsonBody({ limit: 256, parse: parseStrictJson }), (ctx) => {
    ctx.body = { got: ctx.request.body ?? null };
  });
  r.post('/things', requireScope(auth, 'things:write'), (ctx) => {
    ctx.body = { by: ctx.state.principal.keyId };
  });
  r.get('/boom', () => {
    throw new Error('secret: /etc/passwd at line 3');
  });
  r.get('/ctl', () => {
    throw new CtlBudgetExceededError();
  });
  r.get('/ctl-malformed', () => {
    throw new CtlError('malformed', 'amount: must be a decimal string');
  });
  r.get('/http', () => {
    throw new HttpError(409, 'conflict', 'already there');
  });
  r.get('/metrics', metrics.handler);
  const app = new Koa();
  app.silent = true;
  app.use(metrics.middleware);
  app.use(errorMiddleware({ logger: { error: (obj, msg) => logged.push({ obj, msg }) } }));
  app.use(r.routes());
  app.use(r.allowedMethods());
  srv = await listen(app);
});
test.after(async () => {
  await srv.close();
});

async function call(method: string, path: string, body?: string, headers: Record<string, string> = {}) {
  const res = await fetch(srv.url + path, {
    method,
    body,
    headers: body !== undefined ? { 'content-type': 'application/json', ...headers } : headers,
  });
  return { status: res.status, body: await res.json(), headers: res.headers };
}

test('errors: protocol codes, HttpError, and unexpected errors without leaking', async () => {
  assert.equal(await call('GET', '/ctl').then((r) => [r.status, r.body]), [
    402,
    { error: { code: 'budget_exceeded', message: 'amount would exceed the budget ceiling' } },
  ]);
  assert.equal(await call('GET', '/ctl-malformed').then((r) => [r.status, r.body.error.code]), [400, 'malformed']);
  assert.equal(await call('GET', '/http').then((r) => [r.status, r.body]), [
    409,
    { error: { code: 'conflict', message: 'already there' } },
  ]);
  const boom = await call('GET', '/boom');
  assert.equal([boom.status, boom.body], [500, { error: { code: 'internal', message: 'internal error' } }]);
  assert.is(logged.length, 1, 'the unexpected error is logged');
  assert.match(String(logged[0].obj.err.stack), /secret/);
  const nf = await call('GET', '/nope');
  assert.equal([nf.status, nf.body.error.code], [404, 'not_found']);
  assert.equal(await call('DELETE', '/echo').then((r) => [r.status, r.body.error.code]), [405, 'method_not_allowed']);
  assert.is(describeError({ status: 418, expose: true, message: 'teapot' }).status, 418);
  assert.is(describeError('a string').code, 'internal');
});

test(
  'JSON bodies: strict parsing (duplicate keys refused), size limit 413, other types ' + '415, no body undefined',
  async () => {
    assert.equal((await call('POST', '/echo', '{"a":[1,"x"]}')).body, { got: { a: [1, 'x'] } });
    const dup = await call('POST', '/echo', '{"a":1,"a":2}');
    assert.equal([dup.status, dup.body.error.code], [400, 'malformed']);
    assert.match(dup.body.error.message, /^body: /);
    assert.equal(await call('POST', '/echo', '{"a":').then((r) => [r.status, r.body.error.code]), [400, 'malformed']);
    assert.equal(
      await call('POST', '/echo', JSON.stringify({ a: 'x'.repeat(300) })).then((r) => [r.status, r.body.error.code]),
      [413, 'payload_too_large'],
    );
    assert.equal(
      await call('POST', '/echo', 'a', { 'content-type': 'text/plain' }).then((r) => [r.status, r.body.error.code]),
      [415, 'unsupported_media_type'],
    );
    assert.equal(
      await call('POST', '/echo', '{"a":1}', { 'content-type': 'application/merge-patch+json' }).then((r) => r.body),
      { got: { a: 1 } },
    );
    const empty = await fetch(srv.url + '/echo', { method: 'POST' });
    assert.equal(await empty.json(), { got: null });
  },
);

test(
  'API keys: only hashes stored, constant-time match, 401 without a valid key, 403 without ' +
    'the scope, admin implies all',
  async () => {
    assert.match(writer.apiKey, /^ctlk_[A-Za-z0-9-]+_[A-Za-z0-9_-]{43}$/);
    assert.is(writer.record.hash, hashApiKey(writer.apiKey));
    assert.not.ok(JSON.stringify(writer.record).includes(writer.apiKey.split('_').slice(2).join('_')));
    assert.ok(apiKeyMatches(writer.apiKey, writer.record.hash));
    assert.not.ok(apiKeyMatches(writer.apiKey + 'x', writer.record.hash));
    const bearer = (k: string) => ({ authorization: `Bearer ${k}` });
    assert.equal((await call('POST', '/things', undefined, bearer(writer.apiKey))).body, { by: writer.keyId });
    assert.equal((await call('POST', '/things', undefined, bearer(admin.apiKey))).body, { by: admin.keyId });
    assert.equal((await call('POST', '/things', undefined, bearer('bootstrap-key-0123456789'))).body, {
      by: 'bootstrap',
    });
    const none = await call('POST', '/things');
    assert.equal(
      [none.status, none.body.error.code, none.headers.get('www-authenticate')],
      [401, 'unauthorized', 'Bearer'],
    );
    const forged = writer.apiKey.slice(0, -2) + (writer.apiKey.endsWith('AA') ? 'BB' : 'AA');
    assert.is((await call('POST', '/things', undefined, bearer(forged))).status, 401);
    assert.is((await call('POST', '/things', undefined, { authorization: `Basic ${writer.apiKey}` })).status, 401);
    const reader = generateApiKey(['things:read']);
    keys.set(reader.keyId, reader.record);
    const f = await call('POST', '/things', undefined, bearer(reader.apiKey));
    assert.equal([f.status, f.body.error.code], [403, 'forbidden']);
    keys.set(reader.keyId, { ...reader.record, scopes: ['things:write'], revokedAt: '2026-01-01T00:00:00Z' });
    assert.is((await call('POST', '/things', undefined, bearer(reader.apiKey))).status, 401, 'revoked');
    assert.throws(() => createApiKeyAuth({ findKey: () => undefined, bootstrapKey: 'short' }), /16/);
  },
);

test('metrics: counter and histogram per route pattern with final statuses', async () => {
  await call('GET', '/nope');
  const text = await (await fetch(srv.url + '/metrics')).text();
  assert.match(text, /kit_http_requests_total\{method="GET",route="\/ctl",status="402"\} 1/);
  assert.match(text, /kit_http_requests_total\{method="GET",route="unmatched",status="404"\} [0-9]+/);
  assert.match(text, /kit_http_request_duration_seconds_count\{method="POST",route="\/things"\} [0-9]+/);
  assert.not.match(text, /route="\/nope"/);
});

test.run();
