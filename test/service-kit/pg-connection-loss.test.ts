/**
 * A PostgreSQL restart (or a terminated backend) while a transaction holds its connection: the
 * transaction fails, the process lives, and the next query gets a fresh connection. Found by the
 * crash campaign (bench/campaign.mjs), whose PostgreSQL restart ended a gateway process.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import pg from 'pg';
import { openDatabase } from '../../service-kit/index.js';
import { PG_URL, pgAvailable, freshSchema, dropSchema } from './pg-fixture.js';

test('the server ends a connection inside a transaction: the transaction fails, the process and the database go on', async () => {
  if (!(await pgAvailable())) {
    console.log(`SKIPPED connection loss: PostgreSQL at ${PG_URL} is unreachable`);
    return;
  }
  const schema = freshSchema();
  const db = await openDatabase(PG_URL, { schema, poolSize: 2 });
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  try {
    const outcome = await db.tx(async (q) => {
      const row = await q.get<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      await admin.query('SELECT pg_terminate_backend($1)', [row!.pid]);
      // Between two queries, as when a payment signs its receipt: the end arrives as an 'error' event.
      await new Promise((r) => setTimeout(r, 300));
      await q.get('SELECT 1');
    }).then(() => 'committed', (e: Error) => e.message);
    assert.is.not(outcome, 'committed');
    assert.equal(await db.get('SELECT 1 AS one'), { one: 1 });
    assert.equal(await db.tx((q) => q.get('SELECT 2 AS two')), { two: 2 });
  } finally {
    await admin.end();
    await db.close();
    await dropSchema(schema);
  }
});

test.run();
