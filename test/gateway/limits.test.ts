/**
 * Time and size limits on both sides of the forwarder: a silent merchant is 504,
 * an unreachable or oversized one 502, an oversized agent body 413; the Trust Bundle verifies
 * against the gateway's bundle root; `ctl demo` tells the whole story and succeeds.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, type Server } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { verifyTrustBundle, publicKeyPemFromJwk } from '../../src/index.js';
import { sqliteDb, startTestGateway, createSession, proxy, call, type TestGateway, type TestDb } from './helpers.js';

let db: TestDb;
let gw: TestGateway;
let slow: Server;
let big: Server;
let token = '';
const port = (s: { address(): unknown }) => (s.address() as AddressInfo).port;

test.before(async () => {
  slow = createServer(() => {}); // never answers
  big = createServer((_req, res) => res.end(Buffer.alloc(64 * 1024, 97)));
  await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
  await new Promise<void>((r) => big.listen(0, '127.0.0.1', r));
  db = sqliteDb();
  gw = await startTestGateway(db, { forwardTimeoutMs: 300, maxResponseBytes: 16 * 1024, maxBodyBytes: 8 * 1024 });
  token = (await createSession(gw)).sessionToken;
});
test.after(async () => {
  await gw.close();
  slow.closeAllConnections();
  await new Promise((r) => slow.close(r));
  await new Promise((r) => big.close(r));
  await db.drop();
});

test('a merchant that does not answer in time → 504 upstream_timeout', async () => {
  const started = Date.now();
  const res = await proxy(gw, token, `http://127.0.0.1:${port(slow)}/x`);
  assert.is(res.status, 504);
  assert.is(res.body.error.code, 'upstream_timeout');
  assert.ok(Date.now() - started < 3000);
});

test('an unreachable merchant → 502; an oversized response → 502', async () => {
  const closed = createNetServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
  const p = port(closed);
  await new Promise((r) => closed.close(r));
  const res = await proxy(gw, token, `http://127.0.0.1:${p}/x`);
  assert.is(res.status, 502);
  assert.is(res.body.error.code, 'upstream_error');
  const large = await proxy(gw, token, `http://127.0.0.1:${port(big)}/x`);
  assert.is(large.status, 502);
  assert.match(large.body.error.message, /larger than/);
});

test('an agent body over the limit → 413', async () => {
  const res = await proxy(gw, token, `http://127.0.0.1:${port(big)}/x`, { body: 'x'.repeat(9 * 1024) });
  assert.is(res.status, 413);
  assert.is(res.body.error.code, 'payload_too_large');
});

test('the Trust Bundle verifies against the gateway bundle root and lists its keys', async () => {
  const root = (await call(gw.url, 'GET', '/.well-known/ctl-bundle-root.json')).body.keys[0];
  const bundle = (await call(gw.url, 'GET', '/.well-known/ctl-trust-bundle.json')).body;
  const v = await verifyTrustBundle(bundle, await publicKeyPemFromJwk(root));
  assert.ok(v.valid, JSON.stringify(v));
  const jwks = (await call(gw.url, 'GET', '/.well-known/ctl-keys.json')).body.keys;
  assert.equal(
    bundle.issuers[0].keys.map((k: { kid: string }) => k.kid).sort(),
    jwks.map((k: { kid: string }) => k.kid).sort(),
  );
});

test('ctl demo runs the whole story and exits 0', async () => {
  const { main } = await import('../../cli/demo.js');
  const log = console.log;
  const lines: string[] = [];
  console.log = (...a: unknown[]) => void lines.push(a.join(' '));
  let code: unknown;
  try {
    code = await main([]);
  } finally {
    console.log = log;
  }
  assert.is(code, 0, lines.join('\n'));
  assert.ok(lines.some((l) => l.includes('Every step behaved as expected')));
  assert.not.ok(lines.some((l) => l.includes('✗')));
});

test.run();
