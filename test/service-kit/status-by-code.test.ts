/**
 * One status per protocol code, said alike by the services, their READMEs and their OpenAPI
 * documents. A refused artifact (an issuer this verifier does not trust) is not a failed
 * authentication of the HTTP client: `issuer_not_trusted` is 403 with no `WWW-Authenticate`
 * challenge, where a missing or wrong credential of the caller stays 401 with one.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import Koa from 'koa';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { errorMiddleware, DEFAULT_STATUS_BY_CODE, HttpError, listen } from '../../service-kit/index.js';
import { CtlError } from '../../src/index.js';
import { GATEWAY_OPENAPI } from '../../gateway/openapi.js';
import { AUTHORITY_OPENAPI } from '../../authority/openapi.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));

test('issuer_not_trusted is 403 without a challenge; a bad credential of the caller is 401 with one', async () => {
  const app = new Koa();
  app.use(errorMiddleware());
  app.use((ctx) => {
    if (ctx.path === '/artifact') throw new CtlError('issuer_not_trusted', 'did:key:z6Mk… is not enrolled here');
    throw new HttpError(401, 'unauthorized', 'an API key is required');
  });
  const srv = await listen(app, { port: 0 });
  try {
    const refused = await fetch(`${srv.url}/artifact`);
    assert.is(refused.status, 403);
    assert.is(refused.headers.get('www-authenticate'), null, 'no credential of the caller would change it');
    assert.is(((await refused.json()) as any).error.code, 'issuer_not_trusted');
    const unauthenticated = await fetch(`${srv.url}/key`);
    assert.is(unauthenticated.status, 401);
    assert.is(unauthenticated.headers.get('www-authenticate'), 'Bearer');
  } finally {
    await srv.close();
  }
});

test('the READMEs name the status the services answer for each code they mention', () => {
  const wrong: string[] = [];
  for (const file of ['gateway/README.md', 'authority/README.md']) {
    const text = readFileSync(root + file, 'utf8');
    for (const m of text.matchAll(/\b([45]\d\d) `([a-z_]+)`/g)) {
      const status = DEFAULT_STATUS_BY_CODE[m[2]!];
      if (status !== undefined && status !== Number(m[1])) wrong.push(`${file}: "${m[0]}", answered ${status}`);
    }
  }
  assert.equal(wrong, []);
});

test('an OpenAPI response documented for a code has that code’s status', () => {
  const wrong: string[] = [];
  let checked = 0;
  for (const doc of [GATEWAY_OPENAPI, AUTHORITY_OPENAPI])
    for (const [path, item] of Object.entries(doc.paths))
      for (const [method, op] of Object.entries(item as Record<string, { responses: Record<string, any> }>))
        for (const [status, r] of Object.entries(op.responses ?? {})) {
          const code = /^`([a-z_]+)`/.exec(String(r?.description ?? ''))?.[1];
          if (!code || DEFAULT_STATUS_BY_CODE[code] === undefined) continue;
          checked++;
          if (DEFAULT_STATUS_BY_CODE[code] !== Number(status)) wrong.push(`${method} ${path} ${status} \`${code}\``);
        }
  assert.equal(wrong, []);
  assert.ok(checked >= 3, 'issuer_not_trusted is documented where it is answered');
});

test.run();
