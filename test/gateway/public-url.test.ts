/**
 * Review finding 7: the base of the grant's revocationUrl is fixed at start (the configured
 * public URL, else the listen address), never taken from the request's Host header.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { request } from 'node:http';
import { sqliteDb, startTestGateway, ADMIN_KEY, inOneHour } from './helpers.js';
import { startGateway } from '../../gateway/server.js';
import { silentLogger } from '../../service-kit/index.js';

/** POST /sessions with a forged Host header (fetch cannot set one). */
function createWithHost(base: string, key: string, host: string): Promise<{ status: number; body: any }> {
  const body = JSON.stringify({
    budget: { amount: '1000', currency: 'USD' },
    purposes: ['api:search'],
    expiresAt: inOneHour(),
  });
  return new Promise((resolve, reject) => {
    const req = request(
      `${base}/sessions`,
      { method: 'POST', headers: { host, authorization: `Bearer ${key}`, 'content-type': 'application/json' } },
      (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

test(
  'no public URL: a Host header does not choose the revocationUrl (startGateway pins ' + 'the listen address)',
  async () => {
    const db = sqliteDb();
    const running = await startGateway({
      port: 0,
      host: '127.0.0.1',
      databaseUrl: db.url,
      adminKey: ADMIN_KEY,
      logger: silentLogger(),
    });
    try {
      const owner = await fetch(`${running.server.url}/admin/owners`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json' },
        body: '{"label":"o"}',
      }).then((r) => r.json() as Promise<{ apiKey: string }>);
      const res = await createWithHost(running.server.url, owner.apiKey, 'attacker.example');
      assert.is(res.status, 201, JSON.stringify(res.body));
      assert.ok(res.body.revocationUrl.startsWith(`${running.server.url}/`), res.body.revocationUrl);
      assert.not.match(res.body.revocationUrl, /attacker/);
    } finally {
      await running.close();
      await db.drop();
    }
  },
);

test(
  "an app listened on directly (no pin): the connection's local address, not the Host " + 'header; a public URL wins',
  async () => {
    const db = sqliteDb();
    const gw = await startTestGateway(db);
    try {
      const res = await createWithHost(gw.url, gw.ownerKey, 'attacker.example:80');
      assert.is(res.status, 201);
      assert.ok(res.body.revocationUrl.startsWith(`${gw.url}/`), res.body.revocationUrl);
    } finally {
      await gw.close();
    }
    const pub = await startTestGateway(db, { publicUrl: 'https://gw.example/' });
    try {
      const res = await createWithHost(pub.url, pub.ownerKey, 'attacker.example');
      assert.ok(res.body.revocationUrl.startsWith('https://gw.example/'), res.body.revocationUrl);
    } finally {
      await pub.close();
      await db.drop();
    }
  },
);

test.run();
