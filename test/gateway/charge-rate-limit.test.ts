/**
 * `POST /charge` (merchant mode) takes no key and writes a row per request: it is limited per
 * client address (429 `rate_limited` with `Retry-After`), and one address's burst leaves another
 * address its whole budget. On SQLite and on PostgreSQL (one budget for instances on the database).
 */
import { test } from 'uvu';
import { clientKey } from '../../service-kit/service-limits.js';
import * as assert from 'uvu/assert';
import { request } from 'node:http';
import { postgresDb, sqliteDb, startTestGateway, type TestDb } from './helpers.js';

const CHARGE = { points: 5, seconds: 60 };

/** POST /charge from `localAddress` (127.0.0.0/8 is all loopback on Linux: two client addresses on one machine). */
function charge(
  base: string,
  localAddress: string,
): Promise<{ status: number; retryAfter?: string; gatewayError?: string; body: any }> {
  return new Promise((resolve, reject) => {
    const u = new URL('/charge', base);
    const req = request(
      {
        hostname: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        localAddress,
        headers: { 'content-type': 'application/json' },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode!,
            retryAfter: res.headers['retry-after'] as string | undefined,
            gatewayError: res.headers['x-ctl-gateway-error'] as string | undefined,
            body: JSON.parse(Buffer.concat(chunks).toString('utf8')),
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify({ amount: '100', currency: 'USD', description: 'a sale' }));
  });
}

function suite(name: string, makeDb: () => Promise<TestDb | undefined>) {
  test(
    `${name}: a burst of POST /charge from one address is limited (429 rate_limited, Retry-After); ` +
      'another address is not',
    async () => {
      const testDb = await makeDb();
      if (!testDb) return;
      const gw = await startTestGateway(testDb, { rateLimits: { charge: CHARGE } });
      try {
        const burst = await Promise.all(Array.from({ length: 3 * CHARGE.points }, () => charge(gw.url, '127.0.0.1')));
        assert.is(burst.filter((r) => r.status === 201).length, CHARGE.points, burst.map((r) => r.status).join(','));
        const refused = burst.filter((r) => r.status !== 201);
        assert.is(refused.length, 2 * CHARGE.points);
        for (const r of refused) {
          assert.is(r.status, 429);
          assert.is(r.body.error.code, 'rate_limited');
          assert.match(r.body.error.message, /client address/);
          assert.ok(
            r.retryAfter !== undefined && /^[1-9][0-9]*$/.test(r.retryAfter) && Number(r.retryAfter) <= CHARGE.seconds,
            `Retry-After: ${r.retryAfter}`,
          );
          assert.is(r.gatewayError, 'rate_limited');
        }
        // Refused requests wrote nothing.
        assert.is(Number((await gw.db.get<{ n: unknown }>('SELECT COUNT(*) AS n FROM gw_charges'))!.n), CHARGE.points);
        // Another address has its whole budget, then is limited in its turn.
        for (let i = 0; i < CHARGE.points; i++)
          assert.is((await charge(gw.url, '127.0.0.2')).status, 201, `other address, request ${i + 1}`);
        assert.is((await charge(gw.url, '127.0.0.2')).status, 429);
        // Verifying a charge is a read and stays open.
        const id = burst.find((r) => r.status === 201)!.body.chargeId as string;
        assert.is((await fetch(`${gw.url}/charge/${id}/verify`)).status, 200);
      } finally {
        await gw.close();
        await testDb.drop();
      }
    },
  );
}

suite('SQLite', async () => sqliteDb());
suite('PostgreSQL', () => postgresDb('POST /charge rate limit on PostgreSQL'));

test('with the charge limit off (0), a burst of POST /charge passes', async () => {
  const testDb = sqliteDb();
  const open = await startTestGateway(testDb, { rateLimits: { charge: undefined } });
  try {
    const answers = await Promise.all(Array.from({ length: 20 }, () => charge(open.url, '127.0.0.1')));
    assert.ok(answers.every((r) => r.status === 201));
  } finally {
    await open.close();
    await testDb.drop();
  }
});

test('an IPv6 client draws on its /64, an IPv4 client (mapped or not) on its address', () => {
  assert.is(clientKey('2001:db8:1:2::7'), '2001:db8:1:2::/64');
  assert.is(
    clientKey('2001:db8:1:2:ffff:1:2:3'),
    '2001:db8:1:2::/64',
    'another address of the same /64: the same budget',
  );
  assert.is(clientKey('2001:0db8:0001:0002:0:0:0:1'), '2001:db8:1:2::/64', 'leading zeros');
  assert.is(clientKey('2001:db8::1'), '2001:db8:0:0::/64');
  assert.is(clientKey('::1'), '0:0:0:0::/64');
  assert.is(clientKey('fe80::1%eth0'), 'fe80:0:0:0::/64');
  assert.is(clientKey('::ffff:127.0.0.2'), '127.0.0.2');
  assert.is(clientKey('203.0.113.9'), '203.0.113.9');
  assert.is(clientKey(undefined), 'unknown');
});

test.run();
