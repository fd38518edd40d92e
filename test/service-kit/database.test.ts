/** The SQL surface on SQLite and PostgreSQL: placeholders, transactions, serialisation, migrations. */
import { suite, test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { migrate, openDatabase, type SqlDatabase } from '../../service-kit/index.js';
import { PG_URL, dropSchema, freshSchema, pgAvailable } from './pg-fixture.js';
import { startWalCheckpointer } from '../../service-kit/wal-checkpointer.js';

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
    const r = await db.get<{ n: number | string }>(
      'INSERT INTO t (k, n) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET n = t.n + 1 RETURNING n',
      ['a', 1],
    );
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
        db.tx(
          async (q) => {
            const row = await q.get<{ n: number | string }>('SELECT n FROM t WHERE k = ?', ['c']);
            await new Promise((r) => setTimeout(r, 1)); // yield inside the transaction
            await q.run('UPDATE t SET n = ? WHERE k = ?', [Number(row!.n) + 1, 'c']);
          },
          { lock: 'counter-c' },
        ),
      ),
    );
    assert.is(Number((await db.get<{ n: number | string }>('SELECT n FROM t WHERE k = ?', ['c']))!.n), 25);
  });

  s(
    'grouped statements: concurrent ones share a commit; a failing one is refused alone, the others commit',
    async ({ db }) => {
      const put = (k: string) =>
        db.getGrouped<{ k: string }>(k, 'INSERT INTO t (k, n) VALUES (?, ?) RETURNING k', [k, 1]);
      const rows = await Promise.all(Array.from({ length: 10 }, (_, i) => put(`g${i}`)));
      assert.equal(
        rows.map((r) => r?.k),
        Array.from({ length: 10 }, (_, i) => `g${i}`),
      );
      if (db.dialect === 'postgres') {
        // Rows written by one transaction carry its id.
        const tx = await db.get<{ n: string }>(`SELECT COUNT(DISTINCT xmin::text) AS n FROM t WHERE k LIKE 'g%'`);
        assert.ok(Number(tx!.n) < 10, `10 statements in ${tx!.n} transactions`);
      }
      const outcomes = await Promise.allSettled([put('h1'), put('g3'), put('h2')]);
      assert.equal(
        outcomes.map((o) => o.status),
        ['fulfilled', 'rejected', 'fulfilled'],
      );
      const n = await db.get<{ n: number | string }>(`SELECT COUNT(*) AS n FROM t WHERE k IN ('h1', 'h2')`);
      assert.is(Number(n!.n), 2);
    },
  );

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

test(
  'sqlite: concurrent transactions share one commit, each rolled back alone, each answered ' + 'once durable',
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ctl-db-'));
    const file = join(dir, 'db.sqlite');
    const db = await openDatabase(`sqlite:${file}`);
    // A second connection sees only what was committed.
    const other = new Database(file, { readonly: true });
    try {
      await db.exec('CREATE TABLE g (k TEXT PRIMARY KEY)');
      const seenByOther: number[] = [];
      const answered: string[] = [];
      const txs = Array.from({ length: 10 }, (_, i) =>
        db
          .tx(async (q) => {
            await q.run('INSERT INTO g (k) VALUES (?)', [`k${i}`]);
            // Inside the group: the writes of the transactions before this one are not committed yet.
            seenByOther.push((other.prepare('SELECT COUNT(*) AS n FROM g').get() as { n: number }).n);
            if (i === 4) throw new Error('abort 4');
            return i;
          })
          .then(
            (v) => answered.push(`ok${v}`),
            (e: Error) => answered.push(e.message),
          ),
      );
      await Promise.all(txs);
      assert.equal(seenByOther, Array(10).fill(0), 'one commit for the whole group');
      assert.equal(answered.sort(), ['abort 4', 'ok0', 'ok1', 'ok2', 'ok3', 'ok5', 'ok6', 'ok7', 'ok8', 'ok9']);
      const keys = (other.prepare('SELECT k FROM g ORDER BY k').all() as { k: string }[]).map((r) => r.k);
      assert.equal(keys, ['k0', 'k1', 'k2', 'k3', 'k5', 'k6', 'k7', 'k8', 'k9'], 'the failed one alone rolled back');
    } finally {
      other.close();
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

/** A WAL flush the test releases by hand: each call waits until `release` (or `fail`) is called. */
function heldFlush() {
  const pending: Array<{ resolve(): void; reject(e: Error): void }> = [];
  let calls = 0;
  return {
    flush: (_fd: number) =>
      new Promise<void>((resolve, reject) => {
        calls++;
        pending.push({ resolve, reject });
      }),
    get calls() {
      return calls;
    },
    get waiting() {
      return pending.length;
    },
    /** Resolves the flushes asked for so far, once at least one is (the WAL file opens first). */
    async release() {
      await until(() => pending.length > 0);
      for (const p of pending.splice(0)) p.resolve();
    },
    async fail(e: Error) {
      await until(() => pending.length > 0);
      for (const p of pending.splice(0)) p.reject(e);
    },
  };
}

async function until(cond: () => boolean) {
  for (let i = 0; i < 1000 && !cond(); i++) await new Promise((r) => setTimeout(r, 2));
  assert.ok(cond(), 'timed out waiting');
}

const settledYet = async (p: Promise<unknown>) => {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
  return done;
};

test(
  'sqlite: nobody hears of a commit before the WAL flush that covers it, and one flush ' + 'covers a whole group',
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ctl-db-'));
    const held = heldFlush();
    const db = await openDatabase(`sqlite:${join(dir, 'db.sqlite')}`, { flushWal: held.flush });
    try {
      const setup = db.exec('CREATE TABLE g (k TEXT PRIMARY KEY)');
      assert.equal(await settledYet(setup), false, 'DDL outside a transaction waits for its flush');
      await held.release();
      await setup;
      const txs = Array.from({ length: 5 }, (_, i) => db.tx((q) => q.run('INSERT INTO g (k) VALUES (?)', [`k${i}`])));
      assert.equal(await settledYet(Promise.race(txs)), false, 'committed but not flushed: no transaction answered');
      // A read outside any transaction sees the commit, so its answer waits for the flush as well.
      const read = db.get<{ n: number }>('SELECT COUNT(*) AS n FROM g');
      assert.equal(await settledYet(read), false, 'a read of unflushed commits waits');
      const before = held.calls;
      await held.release();
      await Promise.all(txs);
      assert.equal((await read)?.n, 5);
      assert.ok(held.calls - before <= 1, 'one flush for the group');
      // Nothing written since the last flush: a read answers without one.
      const calls = held.calls;
      assert.equal((await db.get<{ n: number }>('SELECT COUNT(*) AS n FROM g'))?.n, 5);
      assert.equal(held.calls, calls);
    } finally {
      if (held.waiting) await held.release();
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

test(
  'sqlite: a failed WAL flush fails the transactions it covered and every later one; ' + 'readiness says so',
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ctl-db-'));
    const held = heldFlush();
    const db = await openDatabase(`sqlite:${join(dir, 'db.sqlite')}`, { flushWal: held.flush });
    try {
      const setup = db.exec('CREATE TABLE g (k TEXT PRIMARY KEY)');
      await settledYet(setup);
      await held.release();
      await setup;
      const tx = db.tx((q) => q.run('INSERT INTO g (k) VALUES (?)', ['a']));
      await settledYet(tx);
      await held.fail(new Error('EIO: the disk failed'));
      await rejects(tx, /EIO/);
      await rejects(
        db.tx((q) => q.run('INSERT INTO g (k) VALUES (?)', ['b'])),
        /EIO/,
      );
      await rejects(db.get('SELECT 1 AS x'), /EIO/);
      assert.equal(await db.ping(), false);
    } finally {
      await db.close().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

test('openDatabase refuses unknown URLs without echoing passwords', async () => {
  await rejects(
    openDatabase('mysql://u:hunter2@h/db'),
    (e: Error) => e instanceof RangeError && !e.message.includes('hunter2'),
  );
  await rejects(openDatabase('postgres://u@h/db', { schema: 'Bad-Name' }), /schema/);
});

test('postgres: a query waits out a server at its connection limit (53300) instead of failing', async () => {
  if (!pgUp) return;
  // A role allowed one connection stands in for a server at max_connections: the refusal is the
  // same 53300, without taking a slot from the tests running beside this one.
  const role = 'ctl_t_one_connection';
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  await admin.query(
    `DO $$ BEGIN CREATE ROLE ${role} LOGIN CONNECTION LIMIT 1; EXCEPTION WHEN duplicate_object THEN NULL; END $$`,
  );
  await admin.end();
  const url = new URL(PG_URL);
  url.username = role;
  url.password = '';
  const hog = new pg.Client({ connectionString: url.href });
  await hog.connect();
  const db = await openDatabase(url.href, { poolSize: 2 });
  try {
    // Control: a second connection of this role is refused at once, so the wait below is real.
    const plain = new pg.Client({ connectionString: url.href });
    const refused = await plain.connect().then(
      () => undefined,
      (e: { code?: string }) => e.code,
    );
    await plain.end().catch(() => {});
    assert.is(refused, '53300');
    const answered = db.get<{ one: number }>('SELECT 1 AS one');
    let settled = false;
    void answered.then(
      () => (settled = true),
      () => (settled = true),
    );
    await new Promise((r) => setTimeout(r, 300));
    assert.is(settled, false, 'the query waited while the limit was reached');
    await hog.end();
    assert.equal(await answered, { one: 1 });
  } finally {
    await hog.end().catch(() => {});
    await db.close();
  }
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

test(
  'sqlite: WAL checkpoints run on a worker, and under steady writes the WAL still starts ' + 'again from the top',
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ctl-db-'));
    const file = join(dir, 'db.sqlite');
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.exec('CREATE TABLE g (k INTEGER PRIMARY KEY, v TEXT)');
    let busy = false;
    const claim = async () => {
      while (busy) await new Promise((r) => setImmediate(r));
      busy = true;
      return () => void (busy = false);
    };
    const windows: number[] = [];
    const cp = startWalCheckpointer(file, {
      selfCheckpoint: (on) => db.pragma(`wal_autocheckpoint = ${on ? 1000 : 0}`),
      claim: async () => {
        const release = await claim();
        windows.push(Date.now());
        return release;
      },
      intervalMs: 1,
      checkpointPages: 50,
      restartPages: 100,
    });
    try {
      assert.equal(
        db.pragma('wal_autocheckpoint', { simple: true }),
        0,
        'the writer no longer checkpoints inside COMMIT',
      );
      const insert = db.prepare('INSERT INTO g (v) VALUES (?)');
      const page = 'x'.repeat(4000);
      // Steady writes, 50 pages a transaction, until the worker has had a restart window and a few
      // more after it (bounded by count, not time).
      let txs = 0;
      let after = 0;
      while (after < 5 && txs < 5000) {
        const release = await claim();
        db.transaction(() => {
          for (let j = 0; j < 50; j++) insert.run(page);
        })();
        release();
        txs++;
        if (windows.length > 0) after++;
        await new Promise((r) => setTimeout(r, 1));
      }
      assert.ok(windows.length > 0, 'a restart window was asked for');
      // Frames now in the WAL: a WAL that never started again would hold every frame written.
      const { log } = (db.pragma('wal_checkpoint(PASSIVE)') as { log: number }[])[0]!;
      assert.ok(log < txs * 50, `the WAL started again (${log} frames in it, ${txs * 50} pages written)`);
      assert.equal((db.prepare('SELECT COUNT(*) AS n FROM g').get() as { n: number }).n, txs * 50);
    } finally {
      await cp.close();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

test('sqlite: the checkpoint worker passes on the count the -shm header gives: the frames not yet copied', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ctl-db-'));
  const file = join(dir, 'db.sqlite');
  const db = new Database(file);
  const reader = new Database(file);
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE g (k INTEGER PRIMARY KEY, v TEXT)');
  const pageSize = db.pragma('page_size', { simple: true }) as number;
  // Frames in the WAL from its size (SQLite file format §4.1: a 32-byte header, then frames of a
  // 24-byte header and one page): a count independent of the wal-index the worker reads.
  const walFrames = () => (statSync(`${file}-wal`).size - 32) / (24 + pageSize);
  const passes: (number | undefined)[] = [];
  let firstPass!: () => void;
  const passed = new Promise<void>((r) => (firstPass = r));
  const cp = startWalCheckpointer(file, {
    selfCheckpoint: (on) => db.pragma(`wal_autocheckpoint = ${on ? 1000 : 0}`),
    claim: async () => () => {},
    intervalMs: 1,
    checkpointPages: 50,
    restartPages: 1_000_000,
    onPass: (n) => {
      passes.push(n);
      firstPass();
    },
  });
  const insert = db.prepare('INSERT INTO g (v) VALUES (?)');
  const write = (rows: number) =>
    db.transaction(() => {
      for (let j = 0; j < rows; j++) insert.run('x'.repeat(4000));
    })();
  try {
    // Below checkpointPages: the worker leaves these frames alone.
    write(30);
    const copied = walFrames();
    assert.ok(copied < 50, `${copied} frames`);
    // Copied here, with a reader holding its snapshot so the next commit cannot start the WAL
    // again from the top: the header then says mxFrame = copied + new frames, nBackfill = copied.
    reader.exec('BEGIN');
    reader.prepare('SELECT COUNT(*) FROM g').get();
    db.pragma('wal_checkpoint(PASSIVE)');
    write(60);
    const written = walFrames();
    assert.ok(Number.isInteger(written) && written - copied >= 60, `${copied} then ${written} frames`);
    // Bounded so a worker that never passes fails here rather than hanging the file; the timer also
    // keeps the process alive meanwhile (the worker is unref'd).
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([passed, new Promise<void>((r) => (timer = setTimeout(r, 20_000)))]);
    clearTimeout(timer);
    // Every pass (the reader keeps nBackfill at `copied`, so the worker may pass more than once)
    // ran on the header's count; undefined would be a timed pass after a failed -shm read.
    assert.ok(passes.length > 0, 'no pass within 20 s');
    for (const n of passes) assert.is(n, written - copied, `passes: ${passes.join(', ')}`);
  } finally {
    if (reader.inTransaction) reader.exec('COMMIT');
    await cp.close();
    reader.close();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
