/**
 * The audit entry is appended inside the transaction of the change it records, and instances
 * sharing PostgreSQL never fork the chain: appends from concurrent transactions on two pools are
 * serialised in the database (advisory lock), whatever locks the transactions took before.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  auditLogMigration,
  auditStagingMigration,
  changeWith,
  createAuditLog,
  migrate,
  openDatabase,
  type SqlDatabase,
} from '../../service-kit/index.js';
import { PG_URL, dropSchema, freshSchema, pgAvailable } from './pg-fixture.js';

const SCHEMA = [
  auditLogMigration('audit_log'),
  auditStagingMigration('audit_log'),
  { id: 'things', sql: 'CREATE TABLE things (id TEXT PRIMARY KEY)' },
];

async function concurrentChanges(dbs: SqlDatabase[], n: number) {
  const logs = dbs.map((db) => createAuditLog(db, 'audit_log'));
  await Promise.all(
    Array.from({ length: n }, (_, i) =>
      changeWith(
        dbs[i % dbs.length],
        (q) => q.run('INSERT INTO things (id) VALUES (?)', [`t${i}`]),
        async (q) => {
          await logs[i % dbs.length].append({ actor: 'test', action: 'thing.add', subject: `t${i}` }, q);
        },
      ),
    ),
  );
  return logs[0];
}

/**
 * Two pools on one fresh PostgreSQL schema with SCHEMA migrated, closed and dropped after `fn`; skipped without
 * PostgreSQL.
 */
async function withTwoPools(fn: (a: SqlDatabase, b: SqlDatabase) => Promise<void>): Promise<void> {
  if (!(await pgAvailable())) return console.log('SKIPPED: no PostgreSQL at', PG_URL);
  const schema = freshSchema();
  const a = await openDatabase(PG_URL, { schema, poolSize: 8 });
  const b = await openDatabase(PG_URL, { schema, poolSize: 8 });
  try {
    await migrate(a, SCHEMA);
    await fn(a, b);
  } finally {
    await a.close();
    await b.close();
    await dropSchema(schema);
  }
}

test('SQLite: a change and its entry commit together; a failed entry takes the change with it', async () => {
  const db = await openDatabase('sqlite::memory:');
  await migrate(db, SCHEMA);
  const log = await concurrentChanges([db], 20);
  const v = await log.verify();
  assert.ok(v.ok && v.count === 20);
  await changeWith(
    db,
    (q) => q.run('INSERT INTO things (id) VALUES (?)', ['lost']),
    async () => {
      throw new Error('the entry could not be written');
    },
  ).catch(() => {});
  assert.is(await db.get('SELECT id FROM things WHERE id = ?', ['lost']), undefined);
  await db.close();
});

test('PostgreSQL, two pools: 120 concurrent audited changes make one unforked chain of 120', async () => {
  await withTwoPools(async (a, b) => {
    const log = await concurrentChanges([a, b], 120);
    const v = await log.verify();
    assert.ok(v.ok, JSON.stringify(v));
    assert.is(v.ok && v.count, 120);
    const subjects = new Set((await log.list({ limit: 1000 })).map((e) => e.subject));
    assert.is(subjects.size, 120, 'each change once');
  });
});

test(
  'PostgreSQL, two pools: entries staged by 120 concurrent changes, sealed by both pools ' +
    'at once, make one chain of 120',
  async () => {
    await withTwoPools(async (a, b) => {
      const logs = [createAuditLog(a, 'audit_log'), createAuditLog(b, 'audit_log')];
      await Promise.all(
        Array.from({ length: 120 }, async (_, i) => {
          await changeWith(
            [a, b][i % 2],
            (q) => q.run('INSERT INTO things (id) VALUES (?)', [`t${i}`]),
            async (q) => {
              await logs[i % 2].stage({ actor: 'test', action: 'thing.add', subject: `t${i}` }, q);
            },
          );
          await logs[i % 2].seal(7); // small batches, interleaved between pools
        }),
      );
      while ((await logs[0].seal()) > 0);
      const v = await logs[0].verify();
      assert.ok(v.ok, JSON.stringify(v));
      assert.is(v.ok && v.count, 120);
      assert.is(new Set((await logs[1].list({ limit: 1000 })).map((e) => e.subject)).size, 120, 'each change once');
      assert.equal(await a.all('SELECT id FROM audit_log_staged'), []);
    });
  },
);

test.run();
