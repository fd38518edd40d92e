/**
 * The client's edges: a gateway that cannot be reached is a CtlError `upstream_error` naming its
 * URL (not the host's bare `TypeError: fetch failed`), and docs/sdk-api.md names only methods the
 * client has.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createGatewayClient } from '../../src/client/index.js';
import { CtlError } from '../../src/errors.js';
import { repoRoot } from '../helpers/vectors.js';
import { freePort } from '../helpers/ports.js';

test('an unreachable gateway: CtlError upstream_error naming the URL, on the owner API and session.fetch', async () => {
  const base = `http://127.0.0.1:${await freePort()}`;
  const owner = createGatewayClient({ baseUrl: base, ownerKey: 'k'.repeat(32), sleep: async () => {} });
  const agent = owner.session('gw_sess_x');
  const failures = await Promise.all([
    owner.getSession('s_1').then(
      () => undefined,
      (e) => e,
    ),
    owner.listSessions().then(
      () => undefined,
      (e) => e,
    ),
    agent.status().then(
      () => undefined,
      (e) => e,
    ),
    agent.fetch('https://merchant.example/x', { retries: 1 }).then(
      () => undefined,
      (e) => e,
    ),
  ]);
  for (const e of failures) {
    assert.instance(e, CtlError, String(e));
    assert.is(e.code, 'upstream_error');
    assert.ok(e.message.includes(base), e.message);
    assert.match(e.message, /ECONNREFUSED/);
    assert.instance(e.cause, TypeError, 'the host error is kept as the cause');
  }
  assert.ok(failures[3].message.includes(`${base}/proxy`));
});

test("an abort is still the caller's own error, not upstream_error", async () => {
  const base = `http://127.0.0.1:${await freePort()}`;
  const ac = new AbortController();
  ac.abort();
  const e = await createGatewayClient({ baseUrl: base })
    .session('gw_sess_x')
    .fetch('https://m.example/', { signal: ac.signal })
    .then(
      () => undefined,
      (x) => x,
    );
  assert.is.not(e?.code, 'upstream_error');
  assert.is(e?.name, 'AbortError');
});

test('docs/sdk-api.md: every client and session method it names exists', () => {
  const doc = readFileSync(join(repoRoot, 'docs/sdk-api.md'), 'utf8');
  const start = doc.indexOf('// agent-side gateway client (src/client)');
  assert.ok(start >= 0, 'the client section is there');
  const section = doc.slice(start, doc.indexOf('```', start));
  const client = createGatewayClient({
    baseUrl: 'http://gateway.invalid',
    fetch: (async () => new Response()) as typeof fetch,
  });
  const session = client.session('gw_sess_x');
  const named = { client: new Set<string>(), session: new Set<string>() };
  for (const m of section.matchAll(/\b(client|session)\.([A-Za-z_]\w*)/g))
    named[m[1] as 'client' | 'session'].add(m[2]!);
  assert.ok(
    named.client.size >= 6 && named.session.size >= 5,
    `too few names read: ${[...named.client, ...named.session]}`,
  );
  for (const n of named.client) assert.ok(n in client, `client.${n} is named in docs/sdk-api.md but does not exist`);
  for (const n of named.session) assert.ok(n in session, `session.${n} is named in docs/sdk-api.md but does not exist`);
  // And the other way: every method the client has is documented.
  for (const n of Object.keys(client)) assert.ok(named.client.has(n), `client.${n} is missing from docs/sdk-api.md`);
  for (const n of Object.keys(session)) assert.ok(named.session.has(n), `session.${n} is missing from docs/sdk-api.md`);
});

test.run();
