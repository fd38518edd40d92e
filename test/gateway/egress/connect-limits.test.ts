/**
 * What one agent can make the egress proxy do with CONNECTs alone: a per-session CONNECT rate
 * limit (429 `rate_limited` with Retry-After, counted once the token is found, pass-through or
 * not), and a bounded cache of minted leaf certificates (least recently used goes first).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { createEgressCa } from '../../../gateway/egress/ca.js';
import { aesKeyWrapper, createSealer } from '../../../service-kit/secrets/index.js';
import { sqliteDb, startTestGateway } from '../helpers.js';
import { agentSession, rawConnect, startStand, type Stand } from './stand.js';

let s: Stand;
test.before(async () => {
  s = await startStand({ egress: { connectLimit: { points: 3, seconds: 60 } } });
});
test.after(async () => {
  await s?.close();
});

test('CONNECTs per session are rate limited: 429 with Retry-After, other sessions unaffected', async () => {
  const a = await agentSession(s);
  const b = await agentSession(s);
  // Three distinct hosts' worth (a decrypted one, a pass-through one, the same again): all count.
  for (const target of [`127.0.0.1:${s.https.port}`, `pinned.test:${s.pinned.port}`, `127.0.0.1:${s.http.port}`]) {
    const ok = await rawConnect(s, target, a.sessionToken);
    assert.is(ok.status, 200, `${target}: ${ok.head}`);
  }
  const over = await rawConnect(s, `127.0.0.1:${s.https.port}`, a.sessionToken);
  assert.is(over.status, 429, over.head);
  assert.match(over.head, /x-ctl-gateway-error: rate_limited/i);
  assert.match(over.head, /retry-after: \d+/i);
  assert.is(JSON.parse(over.body).error.code, 'rate_limited');
  // A wrong token spends nobody's budget; another session has its own.
  assert.is((await rawConnect(s, `127.0.0.1:${s.https.port}`, 'gw_sess_not-a-token')).status, 407);
  assert.is((await rawConnect(s, `127.0.0.1:${s.https.port}`, b.sessionToken)).status, 200);
});

test('the leaf cache is bounded and keeps the hosts in use (least recently used evicted)', async () => {
  const db = sqliteDb();
  const gw = await startTestGateway(db);
  try {
    const sealer = createSealer(aesKeyWrapper(randomBytes(32), 'TEST_KEK'), 'TEST_KEK');
    const ca = createEgressCa({ db: gw.db, sealer, issuer: 'test', now: Date.now, maxLeaves: 3 });
    const first = await ca.contextFor('a.test');
    await ca.contextFor('b.test');
    await ca.contextFor('c.test');
    assert.is(await ca.contextFor('a.test'), first, 'a hit is the same context');
    await ca.contextFor('d.test'); // evicts b.test, the least recently used, not a.test
    assert.is(await ca.contextFor('a.test'), first, 'a host in use stays cached');
    for (let i = 0; i < 20; i++) await ca.contextFor(`h${i}.test`);
    assert.is(ca.cachedLeaves, 3, 'never more than the bound');
  } finally {
    await gw.close();
    await db.drop();
  }
});

test.run();
