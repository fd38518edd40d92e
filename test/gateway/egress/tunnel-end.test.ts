/**
 * A tunnel lives no longer than its session (gateway/README.md "Egress proxy"): revoking a session,
 * or an ancestor, or its expiry closes its tunnels, pass-through (bytes the gateway cannot read)
 * and decrypted alike, so a connection opened while the session was live carries nothing after.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startEgressProxy } from '../../../gateway/egress/proxy-server.js';
import { call, createSession, sqliteDb, startTestGateway } from '../helpers.js';
import { agentSession, openTunnel, settlesWithin, startStand, type Stand } from './stand.js';

let s: Stand;
let merchantCa: string;
test.before(async () => {
  s = await startStand();
  merchantCa = readFileSync(s.merchantCaFile, 'utf8');
});
test.after(async () => {
  await s?.close();
});

const seenWith = (m: { seen: { url: string }[] }, marker: string) =>
  m.seen.filter((r) => r.url.includes(marker)).length;

test('revoking a session closes its pass-through tunnel: no request after it reaches the host', async () => {
  const { sessionToken, sessionId } = await agentSession(s);
  const t = await openTunnel(s.proxyPort, `pinned.test:${s.pinned.port}`, sessionToken, {
    ca: merchantCa,
  });
  assert.is(await t.get('/free?pass=1'), 200);
  const del = await call(s.url, 'DELETE', `/sessions/${sessionId}`, { key: s.ownerKey });
  assert.is(del.status, 200, del.text);
  assert.is(await t.get('/free?pass=2'), undefined, 'the tunnel carries nothing once revoked');
  assert.is(await t.get('/free?pass=3'), undefined);
  assert.ok(t.isClosed());
  assert.is(seenWith(s.pinned, 'pass='), 1, 'only the request before the revocation reached the host');
});

test("revoking a parent closes its child's decrypted tunnel", async () => {
  const parent = await agentSession(s);
  const made = await call(s.url, 'POST', `/sessions/${parent.sessionId}/children`, {
    key: parent.sessionToken,
    body: { budget: { amount: '100' } },
  });
  assert.is(made.status, 201, made.text);
  const child = made.body as { sessionToken: string };
  const t = await openTunnel(s.proxyPort, `127.0.0.1:${s.https.port}`, child.sessionToken, { ca: s.caPem });
  assert.is(await t.get('/free?mitm=1'), 200);
  const del = await call(s.url, 'DELETE', `/sessions/${parent.sessionId}`, { key: s.ownerKey });
  assert.is(del.status, 200, del.text);
  assert.is(await t.get('/free?mitm=2'), undefined);
  assert.ok(t.isClosed());
  assert.is(seenWith(s.https, 'mitm='), 1);
});

test('a tunnel closes when its session expires, with no request in flight', async () => {
  // Whole seconds (RFC 3339 without fraction), at least two ahead; a tunnel of plain http (the
  // gateway's own keep-alive outlasts that, where the merchant's would close a pass-through first).
  const expiresMs = Math.ceil(Date.now() / 1000) * 1000 + 2000;
  const { sessionToken } = await agentSession(s, {
    expiresAt: new Date(expiresMs).toISOString().replace(/\.\d+Z$/, 'Z'),
  });
  const t = await openTunnel(s.proxyPort, `127.0.0.1:${s.http.port}`, sessionToken);
  assert.is(await t.get('/free?expiry=1'), 200);
  assert.ok(await settlesWithin(t.closed, 10_000), 'closed at expiry');
  assert.ok(Date.now() >= expiresMs, 'not before');
  assert.is(await t.get('/free?expiry=2'), undefined);
  assert.is(seenWith(s.http, 'expiry='), 1);
});

test('a request in flight when the session is revoked keeps its answer; the tunnel closes after it', async () => {
  let arrived!: () => void;
  const seen = new Promise<void>((r) => (arrived = r));
  let answer!: () => void;
  const host = createServer((req, res) => {
    if (req.url === '/slow') {
      arrived();
      answer = () => res.end('late');
    } else res.end('ok');
  });
  host.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => host.listen(0, '127.0.0.1', r));
  const port = (host.address() as AddressInfo).port;
  const db = sqliteDb();
  const gw = await startTestGateway(db);
  const egress = await startEgressProxy({
    handle: gw.gw.app.callback(),
    hooks: gw.gw.egress,
    port: 0,
    host: '127.0.0.1',
  });
  try {
    const sess = await createSession(gw);
    // Plain http inside the tunnel: decrypted (not pass-through), each request seen by the gateway.
    const t = await openTunnel(egress.port, `127.0.0.1:${port}`, sess.sessionToken);
    const slow = t.get('/slow');
    await seen;
    const del = await call(gw.url, 'DELETE', `/sessions/${sess.sessionId}`, { key: gw.ownerKey });
    assert.is(del.status, 200, del.text);
    assert.not.ok(t.isClosed(), 'kept open for the answer in flight');
    answer();
    assert.is(await slow, 200, 'the answer in flight is delivered');
    assert.ok(await settlesWithin(t.closed, 5000), 'then the tunnel closes');
    assert.is(await t.get('/after'), undefined);
  } finally {
    await egress.close();
    await gw.close();
    await db.drop();
    host.closeAllConnections();
    await new Promise((r) => host.close(r));
  }
});

test.run();
