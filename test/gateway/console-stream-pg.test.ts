/**
 * Two gateway instances on one PostgreSQL database: a console stream on instance B sees a session
 * created, paid and revoked through instance A, by LISTEN/NOTIFY (console/stream.ts).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  postgresDb,
  startTestGateway,
  startMerchant,
  createSession,
  proxy,
  call,
  type TestGateway,
} from './helpers.js';
import { openStream, type SseStream } from './console-sse.js';

test('a stream on instance B sees what happens on instance A', async () => {
  const pg = await postgresDb('console stream across two instances');
  if (!pg) return;
  const merchant = await startMerchant({ amount: '100' });
  let a: TestGateway | undefined;
  let b: TestGateway | undefined;
  let stream: SseStream | undefined;
  try {
    a = await startTestGateway(pg);
    b = await startTestGateway(pg, {}, a.ownerKey);
    // LISTEN takes effect asynchronously: until then a stream says it is local only.
    for (let i = 0; i < 50; i++) {
      stream = await openStream(b.url, a.ownerKey);
      const ready = await stream.waitFor((e) => e.event === 'ready');
      if (ready.data.mode === 'notify') break;
      stream.close();
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.is(stream!.events[0]!.data.mode, 'notify');

    const s = await createSession(a);
    await stream!.waitFor((e) => e.data.type === 'session.created' && e.data.sessionId === s.sessionId);
    assert.is((await proxy(a, s.sessionToken, `${merchant.url}/x`, { purpose: 'api:search' })).status, 200);
    const paid = await stream!.waitFor((e) => e.data.type === 'payment.completed');
    assert.is(paid.data.sessionId, s.sessionId);
    assert.is(paid.data.amountMinor, '100');
    assert.is((await call(a.url, 'DELETE', `/sessions/${s.sessionId}`, { key: a.ownerKey })).status, 200);
    await stream!.waitFor((e) => e.data.type === 'session.revoked');
    // Each event once on B: B's own listener ignores nothing of A, and A's events are not doubled.
    assert.is(stream!.events.filter((e) => e.data.type === 'payment.completed').length, 1);
  } finally {
    stream?.close();
    await b?.close();
    await a?.close();
    await merchant.close();
    await pg.drop();
  }
});

test.run();
