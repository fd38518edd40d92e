/** The SQL surface on SQLite and PostgreSQL: placeholders, transactions, serialisation, migrations. */
import { suite, test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrate, openDatabase, type SqlDatabase } from '../../service-kit/index.js';
import { PG_URL, dropSchema, freshSchema, pgAvailable } from './pg-fixture.js';

// Decided before any suite is queued: uvu starts running on the first tick after run().
const pgUp = await pgAvailable();

/** Resolves when `p` rejects with an error `check` accepts; fails the test otherwise. */
async function rejects(p: Promise<unknown>, check: RegExp | ((e: Error) => boolean) = () => true): Promise<void> {
  let error: unknown;
  try {
    await p;
  } catch (e) {
    error = e;
  }
  assert.ok(error instanceof Error, 'expected a rejection');
  assert.ok(check instanceof RegExp ? check.test(error.message) : check(error), String(error));
}

function dbSuite(name: string, open: () => Promise<{ db: SqlDatabase; cleanup(): Promise<void> }>) {
  const s = suite<{ db: SqlDatabase; cleanup(): Promise<void> }>(`database: ${name}`, {} as any);
  s.before.each(async (ctx) => {
    Object.assign(ctx, await open());
    await ctx.db.exec('CREATE TABLE t (k TEXT PRIMARY KEY, n BIGINT NOT NULL)');
  });
  s.after.each(async (ctx) => {
    await ctx.cleanup();
  });

  s('placeholders, RETURNING upserts, BIGINT beyond 2^53 as bigint in, text out', async ({ db }) => {
    await db.run('INSERT INTO t (k, n) VALUES (?, ?)', ['a', 1]);
    const r = await db.get<{ n: number | string }>('INSERT INTO t (k, n) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET n = t.n + 1 RETURNING n', ['a', 1]);
    assert.is(Number(r!.n), 2);
    await db.run('INSERT INTO t (k, n) VALUES (?, ?)', ['big', 9007199254740993n]);
    const big = await db.get<{ s: string }>('SELECT CAST(n AS TEXT) AS s FROM t WHERE k = ?', ['big']);
    assert.is(big!.s, '9007199254740993');
    assert.equal(await db.run('UPDATE t SET n = 0 WHERE k = ?', ['none']), { changes: 0 });
    assert.is(await db.get('SELECT * FROM t WHERE k = ?', ['none']), undefined);
  });

  s('a transaction that throws leaves nothing behind', async ({ db }) => {
    await rejects(
      db.tx(async (q) => {
        await q.run('INSERT INTO t (k, n) VALUES (?, ?)', ['x', 1]);
        throw new Error('abort');
      }),
    );
    assert.is(await db.get('SELECT * FROM t WHERE k = ?', ['x']), undefined);
  });

  s('read-modify-write in concurrent locked transactions loses no update', async ({ db }) => {
    await db.run('INSERT INTO t (k, n) VALUES (?, ?)', ['c', 0]);
    await Promise.all(
      Array.from({ length: 25 }, () =>
        db.tx(async (q) => {
          const row = await q.get<{ n: number | string }>('SELECT n FROM t WHERE k = ?', ['c']);
          await new Promise((r) => setTimeout(r, 1)); // yield inside the transaction
          await q.run('UPDATE t SET n = ? WHERE k = ?', [Number(row!.n) + 1, 'c']);
        }, { lock: 'counter-c' }),
      ),
    );
    assert.is(Number((await db.get<{ n: number | string }>('SELECT n FROM t WHERE k = ?', ['c']))!.n), 25);
  });

  s('migrations run once each, in order; a duplicate id is refused', async ({ db }) => {
    const ms = [
      { id: 'm1', sql: 'CREATE TABLE m1 (x TEXT)' },
      { id: 'm2', sqlite: 'CREATE TABLE m2 (x TEXT)', postgres: 'CREATE TABLE m2 (x TEXT)' },
    ];
    assert.equal(await migrate(db, ms), ['m1', 'm2']);
    assert.equal(await migrate(db, ms), []);
    assert.equal(await migrate(db, [...ms, { id: 'm3', sql: 'CREATE TABLE m3 (x TEXT)' }]), ['m3']);
    await rejects(migrate(db, [ms[0], ms[0]]), /duplicate/);
    assert.is(await db.ping(), true);
  });

  s.run();
}

dbSuite('sqlite file', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ctl-db-'));
  const db = await openDatabase(`sqlite:${join(dir, 'x', 'db.sqlite')}`);
  return {
    db,
    async cleanup() {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

test('openDatabase refuses unknown URLs without echoing passwords', async () => {
  await rejects(openDatabase('mysql://u:hunter2@h/db'), (e: Error) => e instanceof RangeError && !e.message.includes('hunter2'));
  await rejects(openDatabase('postgres://u@h/db', { schema: 'Bad-Name' }), /schema/);
});

if (pgUp) {
  dbSuite('postgres', async () => {
    const schema = freshSchema();
    const db = await openDatabase(PG_URL, { schema });
    assert.match(db.description, new RegExp(schema));
    return {
      db,
      async cleanup() {
        await db.close();
        await dropSchema(schema);
      },
    };
  });
} else {
  console.log(`SKIPPED database suite on PostgreSQL: ${PG_URL} is unreachable`);
}

test.run();
