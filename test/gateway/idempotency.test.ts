/**
 * Idempotency-Key on /proxy (gateway/README.md): an agent's retry never pays twice. SQLite here;
 * idempotency-pg.test.ts runs the sharing cases on PostgreSQL.
 */
import { test } from 'uvu';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as assert from 'uvu/assert';
import {
  sqliteDb,
  startTestGateway,
  startMerchant,
  createSession,
  rawRequest,
  type TestDb,
  type TestGateway,
  type Merchant,
} from './helpers.js';
import {
  keyed,
  books,
  slowRail,
  retryReplays,
  concurrentOnePayment,
  crashThenRetry,
  replayAfterRestart,
  expiredKeysPruned,
} from './idempotency-cases.js';

async function withGateway(
  fn: (gw: TestGateway, m: Merchant, db: TestDb) => Promise<void>,
  deps: Parameters<typeof startTestGateway>[1] = {},
) {
  const db = sqliteDb();
  const m = await startMerchant({ amount: '100' });
  let gw: TestGateway | undefined;
  try {
    gw = await startTestGateway(db, deps);
    await fn(gw, m, db);
  } finally {
    await gw?.close();
    await m.close();
    await db.drop();
  }
}

test('a retry after the first answer is the replay: same body, Idempotent-Replayed, one payment', () =>
  withGateway(async (gw, m) => {
    await retryReplays(gw, m);
  }));

test('the key is not forwarded to the merchant', () =>
  withGateway(async (gw, m) => {
    const s = await createSession(gw);
    await keyed(gw, s.sessionToken, `${m.url}/x`, 'k-hidden');
    assert.ok(m.seen.length === 2 && m.seen.every((r) => r.headers['idempotency-key'] === undefined));
  }));

test('two concurrent requests with one key: one payment, the other 409 in flight or the replay', () => {
  let gwRef: TestGateway | undefined;
  return withGateway(
    async (gw, m) => {
      gwRef = gw;
      await concurrentOnePayment(gw, gw, m);
    },
    { rail: slowRail(() => gwRef!.db, 150) },
  );
});

test('the same key with another body, target, method or purpose is 409 conflict; another session is another key', () =>
  withGateway(async (gw, m) => {
    const s = await createSession(gw);
    assert.is((await keyed(gw, s.sessionToken, `${m.url}/a`, 'k-same', { body: 'one' })).status, 200);
    for (const other of [
      keyed(gw, s.sessionToken, `${m.url}/a`, 'k-same', { body: 'two' }),
      keyed(gw, s.sessionToken, `${m.url}/b`, 'k-same', { body: 'one' }),
      keyed(gw, s.sessionToken, `${m.url}/a`, 'k-same', { body: 'one', method: 'PUT' }),
    ]) {
      const r = await other;
      assert.is(r.status, 409, r.text);
      assert.is(r.body.error.code, 'conflict');
      assert.is(r.headers.get('x-ctl-gateway-error'), 'conflict');
    }
    const s2 = await createSession(gw);
    const elsewhere = await keyed(gw, s2.sessionToken, `${m.url}/a`, 'k-same', { body: 'two' });
    assert.is(elsewhere.status, 200);
    assert.is(elsewhere.headers.get('idempotent-replayed'), null);
    assert.is(m.paid.length, 2);
    assert.equal(await books(gw, s.sessionId), { spent: '100', reserved: '0', ledgerPaid: 2 });
  }));

test('keys: printable ASCII, 1–255 characters, sent once; else 400 malformed', () =>
  withGateway(async (gw, m) => {
    const s = await createSession(gw);
    const base = {
      authorization: `Bearer ${s.sessionToken}`,
      'x-target-url': `${m.url}/k`,
      'x-ctl-purpose': 'api:search',
    };
    assert.is((await keyed(gw, s.sessionToken, `${m.url}/k`, 'k'.repeat(255))).status, 200);
    for (const bad of ['k'.repeat(256), 'caf\u00e9', '']) {
      const r = await rawRequest(gw.url, 'POST', '/proxy', { ...base, 'idempotency-key': bad });
      assert.is(r.status, 400, JSON.stringify(bad));
      assert.is(JSON.parse(r.text).error.code, 'malformed');
    }
    const twice = await rawRequest(gw.url, 'POST', '/proxy', [
      ...Object.entries(base).flat(),
      'Idempotency-Key',
      'a',
      'Idempotency-Key',
      'b',
    ] as unknown as Record<string, string>);
    assert.is(twice.status, 400);
    assert.is(m.paid.length, 1, 'a refused key forwards nothing');
  }));

test('a refusal that moved no money frees the key: the soft-limit continuation retry runs with the same key', () =>
  withGateway(async (gw, m) => {
    const s = await createSession(gw, { budget: { amount: '100', currency: 'USD' }, softLimit: { amount: '100' } });
    assert.is((await keyed(gw, s.sessionToken, `${m.url}/1`, 'k-first')).status, 200);
    const paused = await keyed(gw, s.sessionToken, `${m.url}/2`, 'k-second');
    assert.is(paused.status, 409);
    assert.is(paused.body.error.code, 'session_paused');
    const view = await gw.db.get<{ continuation_nonce: string }>(`SELECT continuation_nonce FROM gw_sessions`);
    assert.ok(view!.continuation_nonce);
    const { call } = await import('./helpers.js');
    const token = (await call(gw.url, 'GET', `/sessions/${s.sessionId}`, { key: gw.ownerKey })).body.continuationToken;
    assert.is(
      (
        await call(gw.url, 'PATCH', `/sessions/${s.sessionId}`, {
          key: gw.ownerKey,
          body: { continuationToken: token },
        })
      ).status,
      200,
    );
    const resumed = await keyed(gw, s.sessionToken, `${m.url}/2`, 'k-second');
    assert.is(resumed.status, 200, resumed.text);
    assert.is(resumed.headers.get('idempotent-replayed'), null);
    assert.equal(await books(gw, s.sessionId), { spent: '200', reserved: '0', ledgerPaid: 2 });
  }));

test(
  'an answer above the stored bound is delivered once; the replay is 409 naming its ' + 'size, never a second payment',
  () =>
    withGateway(
      async (gw, m) => {
        const s = await createSession(gw);
        const first = await keyed(gw, s.sessionToken, `${m.url}/big`, 'k-big');
        assert.is(first.status, 200);
        const again = await keyed(gw, s.sessionToken, `${m.url}/big`, 'k-big');
        assert.is(again.status, 409);
        assert.is(again.body.error.code, 'conflict');
        assert.match(again.body.error.message, /bytes kept for a replay/);
        assert.is(again.headers.get('idempotent-replayed'), 'true');
        assert.is(again.headers.get('x-ctl-receipt-id'), first.headers.get('x-ctl-receipt-id'));
        assert.is(again.headers.get('retry-after'), null);
        assert.is(m.paid.length, 1);
      },
      { idempotency: { maxStoredBytes: 10 } },
    ),
);

test('after a restart (a new app on the same database) the key still answers', async () => {
  const db = sqliteDb();
  const m = await startMerchant({ amount: '100' });
  try {
    await replayAfterRestart(db, m);
  } finally {
    await m.close();
    await db.drop();
  }
});

for (const payFirst of [true, false]) {
  test(
    `a kill mid-payment (${payFirst ? 'after' : 'before'} the rail paid), reconcile, retry: ` + 'no second payment',
    async () => {
      const db = sqliteDb();
      const m = await startMerchant({ amount: '100' });
      try {
        await crashThenRetry(db, m, payFirst);
      } finally {
        await m.close();
        await db.drop();
      }
    },
  );
}

test('expired keys: a claim over one past its 24 h starts afresh; pruning deletes them', () =>
  withGateway(async (gw, m) => {
    await expiredKeysPruned(gw, m);
  }));

/** A merchant that drops the connection on the request kinds named in `drop` (unpaid / paid), else behaves. */
async function flakyMerchant() {
  const m = { url: '', drop: new Set<'unpaid' | 'paid'>(), paid: 0, unpaid: 0, close: async () => {} };
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const kind = req.headers['x-payment-receipt'] ? 'paid' : 'unpaid';
      m[kind]++;
      if (m.drop.has(kind)) return req.socket.destroy();
      if (kind === 'paid') {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end('{"paid":true}');
      }
      res.writeHead(402, { 'x-payment': JSON.stringify({ amount: '100', currency: 'USD', address: 'merchant-1' }) });
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  m.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  m.close = () =>
    new Promise((r) => {
      server.close(() => r());
      server.closeAllConnections();
    });
  return m;
}

test(
  "a gateway error after the payment was made is the key's answer: replayed with its " + 'receipt, never paid again',
  () =>
    withGateway(async (gw) => {
      const m = await flakyMerchant();
      try {
        const s = await createSession(gw);
        m.drop.add('paid');
        const first = await keyed(gw, s.sessionToken, `${m.url}/p`, 'k-paid-error');
        assert.is(first.status, 502, first.text);
        assert.is(first.body.error.code, 'paid_response_lost');
        assert.ok(first.headers.get('x-ctl-receipt-id'), 'the live answer names the receipt');
        m.drop.clear();
        const again = await keyed(gw, s.sessionToken, `${m.url}/p`, 'k-paid-error');
        assert.is(again.status, 502);
        assert.is(again.text, first.text);
        assert.is(again.headers.get('idempotent-replayed'), 'true');
        assert.is(again.headers.get('x-ctl-receipt-id'), first.headers.get('x-ctl-receipt-id'));
        assert.is(again.headers.get('x-ctl-gateway-error'), 'paid_response_lost');
        assert.equal([m.unpaid, m.paid], [1, 1], 'the merchant was not asked again');
        assert.equal(await books(gw, s.sessionId), { spent: '100', reserved: '0', ledgerPaid: 1 });
      } finally {
        await m.close();
      }
    }),
);

test('a gateway error that moved no money frees the key: the retry runs and pays once', () =>
  withGateway(async (gw) => {
    const m = await flakyMerchant();
    try {
      const s = await createSession(gw);
      m.drop.add('unpaid');
      const first = await keyed(gw, s.sessionToken, `${m.url}/u`, 'k-free');
      assert.is(first.status, 502);
      assert.is(first.body.error.code, 'upstream_error');
      assert.is(
        Number((await gw.db.get<{ n: unknown }>(`SELECT COUNT(*) AS n FROM gw_idempotency`))!.n),
        0,
        'the key is free',
      );
      m.drop.clear();
      const again = await keyed(gw, s.sessionToken, `${m.url}/u`, 'k-free');
      assert.is(again.status, 200, again.text);
      assert.is(again.headers.get('idempotent-replayed'), null);
      const third = await keyed(gw, s.sessionToken, `${m.url}/u`, 'k-free');
      assert.is(third.headers.get('idempotent-replayed'), 'true');
      assert.is(m.paid, 1);
      assert.equal(await books(gw, s.sessionId), { spent: '100', reserved: '0', ledgerPaid: 1 });
    } finally {
      await m.close();
    }
  }));

test('an attempt that outlives its lease cannot pay again: the retry took the key and the payment id', () =>
  withGateway(
    async (gw) => {
      // The first unpaid request is slow (past the lease); the retry takes the key over and pays.
      let slowFirst = true;
      let paid = 0;
      const server: Server = createServer((req, res) => {
        req.resume();
        req.on('end', async () => {
          if (req.headers['x-payment-receipt']) {
            paid++;
            res.writeHead(200, { 'content-type': 'application/json' });
            return res.end('{"paid":true}');
          }
          if (slowFirst) {
            slowFirst = false;
            await new Promise((r) => setTimeout(r, 400));
          }
          res.writeHead(402, {
            'x-payment': JSON.stringify({ amount: '100', currency: 'USD', address: 'merchant-1' }),
          });
          res.end();
        });
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/slow`;
      try {
        const s = await createSession(gw);
        const first = keyed(gw, s.sessionToken, url, 'k-lease');
        await new Promise((r) => setTimeout(r, 150)); // the 50 ms lease is over, nothing reserved yet
        const retry = await keyed(gw, s.sessionToken, url, 'k-lease');
        assert.is(retry.status, 200, retry.text);
        assert.is(retry.headers.get('idempotent-replayed'), null, 'the retry ran the request');
        const late = await first;
        assert.ok(late.status >= 409, `the outlived attempt is refused: ${late.status} ${late.text}`);
        assert.is(paid, 1, 'the merchant was paid once');
        assert.equal(await books(gw, s.sessionId), { spent: '100', reserved: '0', ledgerPaid: 1 });
        const again = await keyed(gw, s.sessionToken, url, 'k-lease');
        assert.is(again.headers.get('idempotent-replayed'), 'true');
        assert.is(
          again.text,
          retry.text,
          "the key answers with the retry's answer: the late attempt could not overwrite it",
        );
      } finally {
        await new Promise<void>((r) => {
          server.close(() => r());
          server.closeAllConnections();
        });
      }
    },
    { idempotency: { leaseMs: 50 } },
  ));

test('without a key nothing changes: each request pays', () =>
  withGateway(async (gw, m) => {
    const s = await createSession(gw);
    const { proxy } = await import('./helpers.js');
    await proxy(gw, s.sessionToken, `${m.url}/n`, { purpose: 'api:search' });
    await proxy(gw, s.sessionToken, `${m.url}/n`, { purpose: 'api:search' });
    assert.is(m.paid.length, 2);
    assert.is(Number((await gw.db.get<{ n: unknown }>(`SELECT COUNT(*) AS n FROM gw_idempotency`))!.n), 0);
  }));

test.run();
