/**
 * Review (adversarial), holds and captures (PROTOCOL.md §15; spec §3 rule 2: a payment authorized
 * before a revocation is not cancelled retroactively). A hold is out with the merchant when the
 * owner revokes the session (or its parent): the merchant delivers and captures. The capture is
 * honoured and counted (the goods were delivered under a valid authorization), exactly once, on
 * the session and every ancestor, the rest of the hold released everywhere; a capture above the
 * hold or a malformed one pays nothing and leaves nothing reserved; and after the revocation the
 * session pays nothing more. On SQLite and PostgreSQL. Regression guards: these pass today.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  sqliteDb,
  postgresDb,
  startTestGateway,
  createSession,
  proxy,
  call,
  type TestGateway,
  type TestDb,
} from './helpers.js';

const MAX = '3000';

/** A metered merchant that runs `beforeCapture` (the owner's revocation) while it holds, then captures `?capture=`. */
function startHoldMerchant(beforeCapture: () => Promise<void>) {
  const server: Server = createServer((req, res) => {
    const u = new URL(req.url!, 'http://x');
    if (typeof req.headers['x-payment-hold'] !== 'string') {
      res.writeHead(402, {
        'x-payment': JSON.stringify({ maxAmount: MAX, currency: 'USD', address: 'meter-1' }),
      });
      return res.end('{}');
    }
    void beforeCapture().then(() => {
      res.writeHead(200, { 'content-type': 'application/json', 'x-payment-captured': u.searchParams.get('capture')! });
      res.end('{"served":true}');
    });
  });
  return server;
}

for (const engine of ['sqlite', 'postgres'] as const) {
  let db: TestDb | undefined;
  let gw: TestGateway;
  let server: Server;
  let url = '';
  let revokeNext: string | undefined;

  test.before(async () => {
    db = engine === 'sqlite' ? sqliteDb() : await postgresDb('review: holds across a revocation');
    if (!db) return;
    gw = await startTestGateway(db);
    server = startHoldMerchant(async () => {
      if (!revokeNext) return;
      const r = await call(gw.url, 'DELETE', `/sessions/${revokeNext}`, { key: gw.ownerKey });
      if (r.status >= 300) throw new Error(`revoke: ${r.status} ${r.text}`);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  test.after(async () => {
    if (!db) return;
    await gw.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await db.drop();
  });

  const view = async (id: string) => {
    const v = (await call(gw.url, 'GET', `/sessions/${id}`, { key: gw.ownerKey })).body;
    return [v.spentMinor, v.reservedMinor, v.state];
  };
  const paidOnLedger = async (sessionId: string) =>
    (await gw.db.all(`SELECT amount FROM gw_payments WHERE session_id = ? AND state = 'paid'`, [sessionId])).map((r) =>
      String(r.amount),
    );
  const pay = (token: string, capture: string) =>
    proxy(gw, token, `${url}/meter?capture=${capture}`, { purpose: 'api:search' });

  test(`${engine}: the session revoked while its hold is out: the capture is honoured once`, async () => {
    if (!db) return;
    const s = await createSession(gw, { budget: { amount: '10000', currency: 'USD' } });
    revokeNext = s.sessionId;
    try {
      const res = await pay(s.sessionToken, '1200');
      assert.is(res.status, 200, res.text);
      assert.ok(res.headers.get('x-ctl-receipt-id'), 'a receipt for the capture');
    } finally {
      revokeNext = undefined;
    }
    assert.equal(await view(s.sessionId), ['1200', '0', 'revoked']);
    assert.equal(await paidOnLedger(s.sessionId), ['1200']);
    const after = await pay(s.sessionToken, '1');
    assert.is(after.status, 410, after.text);
    assert.is(after.body.error.code, 'session_revoked');
  });

  test(`${engine}: a child's hold when its parent is revoked: captured on both, released on both`, async () => {
    if (!db) return;
    const parent = await createSession(gw, { budget: { amount: '10000', currency: 'USD' } });
    const child = await call(gw.url, 'POST', `/sessions/${parent.sessionId}/children`, {
      key: parent.sessionToken,
      body: { budget: { amount: '5000', currency: 'USD' }, purposes: ['api:search'] },
    });
    assert.is(child.status, 201, child.text);
    revokeNext = parent.sessionId;
    try {
      const res = await pay(child.body.sessionToken, '700');
      assert.is(res.status, 200, res.text);
    } finally {
      revokeNext = undefined;
    }
    assert.equal((await view(child.body.sessionId)).slice(0, 2), ['700', '0']);
    assert.equal((await view(parent.sessionId)).slice(0, 2), ['700', '0']);
  });

  test(`${engine}: captures above the hold, or malformed, pay nothing and leave nothing reserved`, async () => {
    if (!db) return;
    const s = await createSession(gw, { budget: { amount: '10000', currency: 'USD' } });
    const got: string[] = [];
    for (const c of ['3001', '-1', '01', '1e3', '1.5', '300, 400']) {
      const res = await pay(s.sessionToken, encodeURIComponent(c));
      got.push(`${c}→${res.status === 200 ? 'paid' : res.body.error.code}`);
    }
    assert.equal(got, [
      '3001→capture_exceeds_hold',
      '-1→payment_terms_refused',
      '01→payment_terms_refused',
      '1e3→payment_terms_refused',
      '1.5→payment_terms_refused',
      '300, 400→payment_terms_refused',
    ]);
    assert.equal(await view(s.sessionId), ['0', '0', 'active']);
    assert.equal(await paidOnLedger(s.sessionId), []);
  });
}

test.run();
