/**
 * service-kit/rate-limit.ts: the setting's syntax, the 429 it throws, and on PostgreSQL that the
 * count is atomic across pools (no two requests take the last point) and that a failing
 * database falls back to counting in memory rather than refusing or waving everything through.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createLimiter, parseRateLimit, HttpError, openDatabase, type Limiter } from '../../service-kit/index.js';
import { createCounterTable } from '../../service-kit/rate-limit.js';
import { PG_URL, dropSchema, freshSchema, pgAvailable } from './pg-fixture.js';

/** How many of `n` concurrent consumes pass; every refusal must be a proper 429. */
async function passed(limiter: Limiter, key: string, n: number): Promise<number> {
  const results = await Promise.allSettled(Array.from({ length: n }, () => limiter.consume(key)));
  for (const r of results) {
    if (r.status === 'rejected') {
      const e = r.reason as HttpError;
      assert.ok(e instanceof HttpError, String(e));
      assert.is(e.status, 429);
      assert.is(e.code, 'rate_limited');
      assert.match(e.headers?.['Retry-After'] ?? '', /^[1-9][0-9]*$/);
    }
  }
  return results.filter((r) => r.status === 'fulfilled').length;
}

test('parseRateLimit: N/Ss, N/S, N (per 60 s), 0 and unset; anything else names the variable', () => {
  const d = { points: 1, seconds: 1 };
  assert.equal(parseRateLimit('6000/60s', 'X', d), { points: 6000, seconds: 60 });
  assert.equal(parseRateLimit(' 10/1 ', 'X', d), { points: 10, seconds: 1 });
  assert.equal(parseRateLimit('30', 'X', d), { points: 30, seconds: 60 });
  assert.is(parseRateLimit('0', 'X', d), undefined);
  assert.is(parseRateLimit('0/60s', 'X', d), undefined);
  assert.is(parseRateLimit(undefined, 'X', d), d);
  assert.is(parseRateLimit('', 'X', d), d);
  for (const bad of ['-1', '1.5', '10/0', '10/m', 'ten', '10/60ms', '1e3'])
    assert.throws(() => parseRateLimit(bad, 'CTL_SOME_LIMIT', d), /CTL_SOME_LIMIT/, bad);
});

test(
  'in memory: N pass, then 429 rate_limited with Retry-After; keys are independent; ' + 'no limit, no limiter',
  async () => {
    const l = createLimiter(undefined, { points: 3, seconds: 60 }, { name: 'm', what: 'thing' })!;
    assert.is(await passed(l, 'a', 10), 3);
    assert.is(await passed(l, 'b', 2), 2);
    const e = await l.consume('a').then(
      () => undefined,
      (x) => x as HttpError,
    );
    assert.match(e!.message, /3 requests per 60 s for this thing/);
    assert.is(createLimiter(undefined, undefined, { name: 'm', what: 'thing' }), undefined);
    assert.throws(() => createLimiter(undefined, { points: 0, seconds: 1 }, { name: 'm', what: 'x' }), /positive/);
  },
);

test(
  'counter table: a creator that loses the race (42710, 23505, 42P07) goes on when the ' +
    'table is there, fails when it is not',
  async () => {
    for (const code of ['42710', '23505', '42P07']) {
      const lost = Object.assign(new Error('lost the race'), { code });
      const fake = (exists: boolean) =>
        ({
          async query(sql: string) {
            if (sql.startsWith('CREATE')) throw lost;
            return { rows: [{ found: exists }] };
          },
        }) as unknown as Parameters<typeof createCounterTable>[0];
      await createCounterTable(fake(true));
      const e = await createCounterTable(fake(false)).then(
        () => undefined,
        (x) => x,
      );
      assert.is(e, lost, code);
    }
  },
);

const pgUp = await pgAvailable();
if (!pgUp) console.log(`SKIPPED rate limits on PostgreSQL: ${PG_URL} is unreachable`);

test('PostgreSQL: 60 concurrent requests over two pools against a limit of 10: exactly 10 pass', async () => {
  if (!pgUp) return;
  const schema = freshSchema();
  const a = await openDatabase(PG_URL, { schema, poolSize: 5 });
  const b = await openDatabase(PG_URL, { schema, poolSize: 5 });
  try {
    const la = createLimiter(a, { points: 10, seconds: 60 }, { name: 'race', what: 'key' })!;
    const lb = createLimiter(b, { points: 10, seconds: 60 }, { name: 'race', what: 'key' })!;
    const [pa, pb] = await Promise.all([passed(la, 'k', 30), passed(lb, 'k', 30)]);
    assert.is(pa + pb, 10, `${pa} + ${pb}`);
    const row = await a.get<{ points: number }>('SELECT points FROM ctl_rate_limits WHERE key = ?', ['race:k']);
    assert.ok(row && Number(row.points) >= 10, JSON.stringify(row));
    // UNLOGGED: no WAL flush per request.
    const rel = await a.get<{ p: string }>(
      'SELECT c.relpersistence AS p FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace ' +
        "WHERE c.relname = 'ctl_rate_limits' AND n.nspname = current_schema()",
    );
    assert.is(rel?.p, 'u');
    // `local` limiters never touch the table.
    const local = createLimiter(a, { points: 2, seconds: 60 }, { name: 'loc', what: 'address', local: true })!;
    assert.is(await passed(local, 'k', 5), 2);
    assert.is(await a.get('SELECT key FROM ctl_rate_limits WHERE key = ?', ['loc:k']), undefined);
  } finally {
    await a.close();
    await b.close();
    await dropSchema(schema);
  }
});

test(
  'PostgreSQL: when the database fails, the limit is still counted (in memory), never ' + 'a 500 nor a free pass',
  async () => {
    if (!pgUp) return;
    const schema = freshSchema();
    const db = await openDatabase(PG_URL, { schema, poolSize: 2 });
    const l = createLimiter(db, { points: 4, seconds: 60 }, { name: 'ins', what: 'key' })!;
    try {
      assert.is(await passed(l, 'k', 1), 1);
    } finally {
      await db.close(); // from here every query of this pool fails
      await dropSchema(schema);
    }
    assert.is(await passed(l, 'k', 10), 4);
    // A database unreachable from the start: the table cannot be made, memory counts.
    const down = await openDatabase('postgres://postgres@127.0.0.1:1/none');
    try {
      const l2 = createLimiter(down, { points: 2, seconds: 60 }, { name: 'down', what: 'key' })!;
      assert.is(await passed(l2, 'k', 5), 2);
    } finally {
      await down.close();
    }
  },
);

test.run();
