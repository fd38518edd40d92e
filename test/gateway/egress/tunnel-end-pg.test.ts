/**
 * Two gateway instances on one PostgreSQL database: a session revoked through instance A closes
 * the tunnel it holds open on instance B's egress proxy within B's re-check interval (each
 * instance re-reads the sessions of its open tunnels; gateway/README.md "Egress proxy").
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startEgressProxy } from '../../../gateway/egress/proxy-server.js';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { call, createSession, postgresDb, startTestGateway, type TestGateway } from '../helpers.js';
import { openTunnel, settlesWithin } from './stand.js';

const RECHECK_MS = 250;

test('a tunnel on instance B closes when instance A revokes its session', async () => {
  const pg = await postgresDb('tunnels across two instances');
  if (!pg) return;
  // A host that keeps an idle connection open far longer than this test waits.
  const seen: string[] = [];
  const host = createServer((req, res) => {
    seen.push(req.url!);
    res.end('ok');
  });
  host.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => host.listen(0, '127.0.0.1', r));
  const port = (host.address() as AddressInfo).port;
  let a: TestGateway | undefined;
  let b: TestGateway | undefined;
  let egress: Awaited<ReturnType<typeof startEgressProxy>> | undefined;
  try {
    a = await startTestGateway(pg);
    b = await startTestGateway(pg, {}, a.ownerKey);
    egress = await startEgressProxy({
      handle: b.gw.app.callback(),
      hooks: b.gw.egress,
      passThrough: ['127.0.0.1'],
      port: 0,
      host: '127.0.0.1',
      sessionRecheckMs: RECHECK_MS,
    });
    const s = await createSession(a);
    const t = await openTunnel(egress.port, `127.0.0.1:${port}`, s.sessionToken);
    assert.is(await t.get('/free?n=1'), 200);
    const del = await call(a.url, 'DELETE', `/sessions/${s.sessionId}`, { key: a.ownerKey });
    assert.is(del.status, 200, del.text);
    const revokedAt = Date.now();
    // Generous: the bound is one re-check interval plus a query, on a machine shared by many jobs.
    assert.ok(await settlesWithin(t.closed, 20 * RECHECK_MS + 5000), 'closed by instance B');
    console.log(`  tunnel on B closed ${Date.now() - revokedAt} ms after A's revocation (re-check ${RECHECK_MS} ms)`);
    assert.is(await t.get('/free?n=2'), undefined);
    assert.equal(seen, ['/free?n=1']);
  } finally {
    await egress?.close();
    await b?.close();
    await a?.close();
    host.closeAllConnections();
    await new Promise((r) => host.close(r));
    await pg.drop();
  }
});

test.run();
