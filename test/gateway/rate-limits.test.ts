/**
 * Rate limits of the gateway (spec §8): per budget owner on the owner API (all its keys share one
 * budget, other owners are untouched), per session token on /proxy, 429 `rate_limited` with
 * `Retry-After`; on PostgreSQL one budget for every instance on the database; `0` disables.
 * And the longest session (CTL_GATEWAY_MAX_SESSION_SECONDS), refused one second past it.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  ADMIN_KEY,
  call,
  createSession,
  inOneHour,
  postgresDb,
  proxy,
  sqliteDb,
  startMerchant,
  startTestGateway,
  type CallResult,
  type Merchant,
  type TestDb,
  type TestGateway,
} from './helpers.js';
import { gatewayRateLimitsFromEnv } from '../../service-kit/service-limits.js';
import { maxSessionSecondsFromEnv, DEFAULT_MAX_SESSION_SECONDS } from '../../gateway/sessions/config.js';
import { readGatewayConfig } from '../../gateway/config.js';
import { formatTimestamp, createGatewayClient, CtlError } from '../../src/index.js';

const OWNER = { points: 5, seconds: 60 };
const SESSION = { points: 4, seconds: 60 };

function assertLimited(res: CallResult, what: RegExp) {
  assert.is(res.status, 429, res.text);
  assert.is(res.body.error.code, 'rate_limited');
  assert.match(res.body.error.message, what);
  const retry = res.headers.get('retry-after');
  assert.ok(retry !== null && /^[1-9][0-9]*$/.test(retry) && Number(retry) <= 60, `Retry-After: ${retry}`);
  assert.is(res.headers.get('x-ctl-gateway-error'), 'rate_limited');
}

async function newOwner(gw: TestGateway): Promise<{ ownerId: string; apiKey: string }> {
  const res = await call(gw.url, 'POST', '/admin/owners', { key: ADMIN_KEY, body: { label: 'another owner' } });
  assert.is(res.status, 201, res.text);
  return res.body;
}

const listSessions = (gw: { url: string }, key: string) => call(gw.url, 'GET', '/sessions', { key });

function suite(name: string, makeDb: () => Promise<TestDb | undefined>) {
  let testDb: TestDb | undefined;
  let merchant: Merchant;
  const limited = () => ({ rateLimits: { owner: OWNER, session: SESSION } });

  test.before(async () => {
    testDb = await makeDb();
    merchant = await startMerchant();
  });
  test.after(async () => {
    await merchant?.close();
    await testDb?.drop();
  });

  test(
    `${name}: an owner's requests past its limit get 429 rate_limited with Retry-After, ` +
      'whichever of its keys; another owner is untouched',
    async () => {
      if (!testDb) return;
      const gw = await startTestGateway(testDb, limited());
      try {
        const a = await newOwner(gw);
        const b = await newOwner(gw);
        const second = await call(gw.url, 'POST', `/admin/owners/${a.ownerId}/keys`, { key: ADMIN_KEY });
        assert.is(second.status, 201, second.text);
        // Five requests over both keys of owner A, then each of its keys is refused, on any route.
        for (let i = 0; i < OWNER.points; i++)
          assert.is((await listSessions(gw, i % 2 ? second.body.apiKey : a.apiKey)).status, 200, `request ${i + 1}`);
        assertLimited(await listSessions(gw, a.apiKey), /budget owner/);
        assertLimited(await listSessions(gw, second.body.apiKey), /budget owner/);
        const create = await call(gw.url, 'POST', '/sessions', {
          key: a.apiKey,
          body: { budget: { amount: '1', currency: 'USD' }, purposes: ['a:b'], expiresAt: inOneHour() },
        });
        assertLimited(create, /budget owner/);
        assert.is(create.body.error.message.includes('5 requests per 60 s'), true, create.body.error.message);
        // Owner B has its own budget, all of it.
        for (let i = 0; i < OWNER.points; i++)
          assert.is((await listSessions(gw, b.apiKey)).status, 200, `owner B request ${i + 1}`);
        assertLimited(await listSessions(gw, b.apiKey), /budget owner/);
        // The operator's admin key is never limited (an incident must not wait for a window).
        for (let i = 0; i < 3 * OWNER.points; i++)
          assert.is((await call(gw.url, 'GET', `/admin/owners/${a.ownerId}`, { key: ADMIN_KEY })).status, 200);
      } finally {
        await gw.close();
      }
    },
  );

  test(`${name}: a key or token that does not verify spends nothing of anyone's budget`, async () => {
    if (!testDb) return;
    const gw = await startTestGateway(testDb, limited());
    try {
      // Same key id, wrong secret: 401 every time, and the owner keeps its whole budget.
      const forged = gw.ownerKey.replace(/_[^_]+$/, '_' + 'A'.repeat(43));
      for (let i = 0; i < 10; i++) assert.is((await listSessions(gw, forged)).status, 401);
      for (let i = 0; i < OWNER.points; i++)
        assert.is((await listSessions(gw, gw.ownerKey)).status, 200, `request ${i + 1}`);
      assertLimited(await listSessions(gw, gw.ownerKey), /budget owner/);
      // Made-up session tokens: 401, and not one counter written for them (PostgreSQL's table).
      const before = gw.db.dialect === 'postgres' ? (await gw.db.all('SELECT key FROM ctl_rate_limits')).length : 0;
      for (let i = 0; i < 10; i++)
        assert.is((await proxy(gw, `gw_sess_made_up_${i}`, `${merchant.url}/free`)).status, 401);
      if (gw.db.dialect === 'postgres') assert.is((await gw.db.all('SELECT key FROM ctl_rate_limits')).length, before);
    } finally {
      await gw.close();
    }
  });

  test(`${name}: /proxy is limited per session; another session of the same owner is untouched`, async () => {
    if (!testDb) return;
    const gw = await startTestGateway(testDb, { rateLimits: { session: SESSION } });
    try {
      const a = await createSession(gw);
      const b = await createSession(gw);
      for (let i = 0; i < SESSION.points; i++)
        assert.is((await proxy(gw, a.sessionToken, `${merchant.url}/free`)).status, 200, `request ${i + 1}`);
      const before = merchant.seen.length;
      const refused = await proxy(gw, a.sessionToken, `${merchant.url}/free`);
      assertLimited(refused, /session/);
      assert.is(merchant.seen.length, before, 'a refused request is not forwarded');
      for (let i = 0; i < SESSION.points; i++)
        assert.is((await proxy(gw, b.sessionToken, `${merchant.url}/free`)).status, 200, `session B request ${i + 1}`);
      // The SDK's gateway client: a CtlError `rate_limited` with status and retryAfterSeconds.
      const agent = createGatewayClient({ baseUrl: gw.url }).session(a.sessionToken);
      const e = await agent.fetch(`${merchant.url}/free`).then(
        () => undefined,
        (x) => x as CtlError & { status?: number; retryAfterSeconds?: number },
      );
      assert.ok(e instanceof CtlError, String(e));
      assert.is(e.code, 'rate_limited');
      assert.is(e.status, 429);
      assert.ok(
        Number.isInteger(e.retryAfterSeconds) && e.retryAfterSeconds! >= 1 && e.retryAfterSeconds! <= 60,
        String(e.retryAfterSeconds),
      );
      // The agent's other calls with its token (continuation) spend the same budget.
      assertLimited(
        await call(gw.url, 'PATCH', `/sessions/${a.sessionId}`, {
          key: a.sessionToken,
          body: { continuationToken: 'x' },
        }),
        /session/,
      );
    } finally {
      await gw.close();
    }
  });

  test(`${name}: a limit of 0 (disabled) lets everything through; Retry-After is honest`, async () => {
    if (!testDb) return;
    const open = await startTestGateway(testDb, {
      rateLimits: gatewayRateLimitsFromEnv({ CTL_GATEWAY_RATE_LIMIT_OWNER: '0', CTL_GATEWAY_RATE_LIMIT_SESSION: '0' }),
    });
    try {
      const s = await createSession(open);
      for (let i = 0; i < 3 * OWNER.points; i++) assert.is((await listSessions(open, open.ownerKey)).status, 200);
      for (let i = 0; i < 3 * SESSION.points; i++)
        assert.is((await proxy(open, s.sessionToken, `${merchant.url}/free`)).status, 200);
    } finally {
      await open.close();
    }
    // A two-second window: refused, then served again once Retry-After has passed.
    const short = await startTestGateway(testDb, { rateLimits: { owner: { points: 2, seconds: 2 } } });
    try {
      for (let i = 0; i < 2; i++) assert.is((await listSessions(short, short.ownerKey)).status, 200);
      const refused = await listSessions(short, short.ownerKey);
      assertLimited(refused, /2 requests per 2 s/);
      await new Promise((r) => setTimeout(r, Number(refused.headers.get('retry-after')) * 1000 + 50));
      assert.is((await listSessions(short, short.ownerKey)).status, 200);
    } finally {
      await short.close();
    }
  });

  test(
    `${name}: expiresAt at most CTL_GATEWAY_MAX_SESSION_SECONDS ahead: accepted at the ` +
      'limit, refused one second past it',
    async () => {
      if (!testDb) return;
      const T = Math.floor(Date.now() / 1000) * 1000;
      const max = 3600;
      const gw = await startTestGateway(testDb, { now: () => T, maxSessionSeconds: max });
      try {
        const body = (at: number) => ({
          budget: { amount: '10', currency: 'USD' },
          purposes: ['api:search'],
          expiresAt: formatTimestamp(at),
        });
        const past = await call(gw.url, 'POST', '/sessions', { key: gw.ownerKey, body: body(T + max * 1000 + 1000) });
        assert.is(past.status, 400, past.text);
        assert.is(past.body.error.code, 'malformed');
        assert.match(past.body.error.message, /^expiresAt: /);
        assert.match(past.body.error.message, /3600/);
        const far = await call(gw.url, 'POST', '/sessions', {
          key: gw.ownerKey,
          body: body(Date.parse('9999-12-31T23:59:59Z')),
        });
        assert.is(far.status, 400);
        assert.match(far.body.error.message, /^expiresAt: .*CTL_GATEWAY_MAX_SESSION_SECONDS/);
        const at = await call(gw.url, 'POST', '/sessions', { key: gw.ownerKey, body: body(T + max * 1000) });
        assert.is(at.status, 201, at.text);
      } finally {
        await gw.close();
      }
      // The default: 30 days.
      const dflt = await startTestGateway(testDb);
      try {
        const day = 86_400_000;
        const refused = await call(dflt.url, 'POST', '/sessions', {
          key: dflt.ownerKey,
          body: {
            budget: { amount: '10', currency: 'USD' },
            purposes: ['a:b'],
            expiresAt: formatTimestamp(Date.now() + 31 * day),
          },
        });
        assert.is(refused.status, 400);
        assert.match(refused.body.error.message, /^expiresAt: at most 2592000 s/);
        const ok = await call(dflt.url, 'POST', '/sessions', {
          key: dflt.ownerKey,
          body: {
            budget: { amount: '10', currency: 'USD' },
            purposes: ['a:b'],
            expiresAt: formatTimestamp(Date.now() + 29 * day),
          },
        });
        assert.is(ok.status, 201, ok.text);
      } finally {
        await dflt.close();
      }
    },
  );
}

test('the environment: defaults, N/Ss, 0 disables, a bad value names its variable', () => {
  const d = gatewayRateLimitsFromEnv({});
  assert.equal(d, {
    owner: { points: 6000, seconds: 60 },
    session: { points: 1200, seconds: 60 },
    charge: { points: 1200, seconds: 60 },
  });
  assert.equal(
    gatewayRateLimitsFromEnv({
      CTL_GATEWAY_RATE_LIMIT_OWNER: '100/1s',
      CTL_GATEWAY_RATE_LIMIT_SESSION: '0',
      CTL_GATEWAY_RATE_LIMIT_CHARGE: '0',
    }),
    { owner: { points: 100, seconds: 1 }, session: undefined, charge: undefined },
  );
  assert.equal(gatewayRateLimitsFromEnv({ CTL_GATEWAY_RATE_LIMIT_CHARGE: '20/10s' }).charge, {
    points: 20,
    seconds: 10,
  });
  assert.throws(
    () => gatewayRateLimitsFromEnv({ CTL_GATEWAY_RATE_LIMIT_CHARGE: 'many' }),
    /CTL_GATEWAY_RATE_LIMIT_CHARGE/,
  );
  assert.equal(gatewayRateLimitsFromEnv({ CTL_GATEWAY_RATE_LIMIT_OWNER: '30' }).owner, { points: 30, seconds: 60 });
  assert.throws(
    () => gatewayRateLimitsFromEnv({ CTL_GATEWAY_RATE_LIMIT_SESSION: 'lots' }),
    /CTL_GATEWAY_RATE_LIMIT_SESSION/,
  );
  assert.throws(
    () => gatewayRateLimitsFromEnv({ CTL_GATEWAY_RATE_LIMIT_OWNER: '10/0s' }),
    /CTL_GATEWAY_RATE_LIMIT_OWNER/,
  );
  assert.is(maxSessionSecondsFromEnv({}), 2_592_000);
  assert.is(DEFAULT_MAX_SESSION_SECONDS, 30 * 86_400);
  assert.is(maxSessionSecondsFromEnv({ CTL_GATEWAY_MAX_SESSION_SECONDS: '600' }), 600);
  assert.throws(
    () => maxSessionSecondsFromEnv({ CTL_GATEWAY_MAX_SESSION_SECONDS: '-1' }),
    /CTL_GATEWAY_MAX_SESSION_SECONDS/,
  );
  // `ctl gateway` reads them through readGatewayConfig.
  const o = readGatewayConfig({ CTL_GATEWAY_RATE_LIMIT_OWNER: '7/7s', CTL_GATEWAY_MAX_SESSION_SECONDS: '60' });
  assert.equal(o.rateLimits?.owner, { points: 7, seconds: 7 });
  assert.is(o.maxSessionSeconds, 60);
});

suite('SQLite', async () => sqliteDb());
suite('PostgreSQL', () => postgresDb('gateway rate limits on PostgreSQL'));

test('PostgreSQL: two gateways on one database spend one budget per owner and per session', async () => {
  const testDb = await postgresDb('two gateways sharing rate limits');
  if (!testDb) return;
  const merchant = await startMerchant();
  const one = await startTestGateway(testDb, { rateLimits: { owner: OWNER, session: SESSION } });
  const two = await startTestGateway(testDb, { rateLimits: { owner: OWNER, session: SESSION } }, one.ownerKey);
  try {
    // Owner: 5 requests spread over both instances, then both refuse.
    for (let i = 0; i < OWNER.points; i++)
      assert.is((await listSessions(i % 2 ? two : one, one.ownerKey)).status, 200, `request ${i + 1}`);
    assertLimited(await listSessions(one, one.ownerKey), /budget owner/);
    assertLimited(await listSessions(two, one.ownerKey), /budget owner/);
    // Another owner made on instance two is served by both.
    const b = await newOwner(two);
    assert.is((await listSessions(one, b.apiKey)).status, 200);
    assert.is((await listSessions(two, b.apiKey)).status, 200);
    // Session: created by owner B, 4 proxied requests over both instances, then both refuse.
    const s = await createSession({ ...one, ownerKey: b.apiKey });
    for (let i = 0; i < SESSION.points; i++)
      assert.is((await proxy(i % 2 ? one : two, s.sessionToken, `${merchant.url}/free`)).status, 200, `proxy ${i + 1}`);
    assertLimited(await proxy(one, s.sessionToken, `${merchant.url}/free`), /session/);
    assertLimited(await proxy(two, s.sessionToken, `${merchant.url}/free`), /session/);
    // The counters are keyed by owner id and session id, never a credential.
    const rows = await one.db.all<{ key: string }>('SELECT key FROM ctl_rate_limits');
    assert.ok(
      rows.some((r) => r.key.startsWith('gw_owner:own_')),
      JSON.stringify(rows),
    );
    assert.ok(
      rows.some((r) => r.key === `gw_session:${s.sessionId}`),
      JSON.stringify(rows),
    );
    assert.ok(
      rows.every((r) => !r.key.includes('gw_sess_') && !r.key.includes('ctlk_')),
      JSON.stringify(rows),
    );
  } finally {
    await one.close();
    await two.close();
    await merchant.close();
    await testDb.drop();
  }
});

test.run();
