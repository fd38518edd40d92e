/**
 * A PostgreSQL restart (or a terminated backend) while a transaction holds its connection: the
 * transaction fails, the process lives, and the next query gets a fresh connection. Found by the
 * crash campaign (bench/campaign.mjs), whose PostgreSQL restart ended a gateway process.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import pg from 'pg';
import { openDatabase, DatabaseUnavailableError, describeError, isConnectionLoss } from '../../service-kit/index.js';
import { PG_URL, pgAvailable, freshSchema, dropSchema } from './pg-fixture.js';

test(
  'the server ends a connection inside a transaction: the transaction fails, the process ' + 'and the database go on',
  async () => {
    if (!(await pgAvailable())) {
      console.log(`SKIPPED connection loss: PostgreSQL at ${PG_URL} is unreachable`);
      return;
    }
    const schema = freshSchema();
    const db = await openDatabase(PG_URL, { schema, poolSize: 2 });
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    try {
      const outcome = await db
        .tx(async (q) => {
          const row = await q.get<{ pid: number }>('SELECT pg_backend_pid() AS pid');
          await admin.query('SELECT pg_terminate_backend($1)', [row!.pid]);
          // Between two queries, as when a payment signs its receipt: the end arrives as an 'error' event.
          await new Promise((r) => setTimeout(r, 300));
          await q.get('SELECT 1');
        })
        .then(
          () => 'committed',
          (e: Error) => (e instanceof DatabaseUnavailableError ? `${e.status} ${e.code}` : e.message),
        );
      assert.is(outcome, '503 unavailable');
      assert.equal(await db.get('SELECT 1 AS one'), { one: 1 });
      assert.equal(await db.tx((q) => q.get('SELECT 2 AS two')), { two: 2 });
    } finally {
      await admin.end();
      await db.close();
      await dropSchema(schema);
    }
  },
);

/**
 * A backend ended while it runs a statement: the statement gets the server's error, then the
 * socket's end arrives as a second 'error' event with no query to take it. Through pool.query
 * (every statement outside a transaction) and through the group commit's own checkout, that
 * second event must not be unhandled (it ends the process), and the statement fails `unavailable`.
 */
test(
  'a backend terminated under a statement, alone or in a group commit: 503 unavailable, ' +
    'the process lives, the pool recovers',
  async () => {
    if (!(await pgAvailable())) {
      console.log(`SKIPPED connection loss: PostgreSQL at ${PG_URL} is unreachable`);
      return;
    }
    const schema = freshSchema();
    const db = await openDatabase(PG_URL, { schema, poolSize: 4 });
    const suicide = 'SELECT pg_terminate_backend(pg_backend_pid()) AS ended';
    const outcome = (p: Promise<unknown>) =>
      p.then(
        () => 'answered',
        (e: unknown) =>
          e instanceof DatabaseUnavailableError ? `${e.status} ${e.code}` : `other: ${(e as Error).message}`,
      );
    try {
      for (let round = 0; round < 3; round++) {
        // Outside a transaction: pool.query.
        assert.is(await outcome(db.get(suicide)), '503 unavailable');
        // Several at once: one group, on a client the group commit checked out itself.
        const grouped = await Promise.all(
          Array.from({ length: 4 }, (_, i) => outcome(db.getGrouped(`k${i}`, i === 2 ? suicide : 'SELECT 1 AS one'))),
        );
        assert.ok(grouped.includes('503 unavailable'), grouped.join(', '));
        assert.ok(
          grouped.every((g) => g === 'answered' || g === '503 unavailable'),
          grouped.join(', '),
        );
        // The socket's end comes after the server's error: give it time to arrive.
        await new Promise((r) => setTimeout(r, 200));
      }
      assert.equal(await db.get('SELECT 1 AS one'), { one: 1 });
      assert.equal(await db.getGrouped('k', 'SELECT 3 AS three'), { three: 3 });
    } finally {
      await db.close();
      await dropSchema(schema);
    }
  },
);

test('a lost connection is 503 unavailable wherever it surfaces; other failures keep their status', () => {
  const terminated = Object.assign(new Error('terminating connection due to administrator command'), {
    code: '57P01',
    severity: 'FATAL',
  });
  const ended = new Error('Connection terminated unexpectedly');
  for (const e of [terminated, ended, new DatabaseUnavailableError(ended)]) {
    const d = describeError(e);
    assert.equal(
      [d.status, d.code, d.message],
      [503, 'unavailable', 'the database is unavailable'],
      (e as Error).message,
    );
  }
  // A socket error is the database's only when the driver raised it: elsewhere it may be a merchant's.
  const reset = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
  assert.ok(isConnectionLoss(reset));
  assert.is(describeError(reset).status, 500);
  // A statement's own failure is not a connection loss.
  assert.not.ok(isConnectionLoss(Object.assign(new Error('duplicate key'), { code: '23505', severity: 'ERROR' })));
  assert.not.ok(isConnectionLoss(Object.assign(new Error('x'), { code: '08P01' }), false));
});

test.run();
