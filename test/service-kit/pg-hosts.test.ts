/**
 * PostgreSQL URLs with several hosts (service-kit/pg-hosts.ts): how they are taken apart, which
 * host a connection goes to next, and a pool that moves to the next host when the one it used
 * stops answering (a failover), or passes over one that does not accept writes.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, connect, type Server, type Socket } from 'node:net';
import {
  openDatabase,
  parsePostgresUrl,
  createHostRotation,
  DatabaseUnavailableError,
  NotReadWriteError,
} from '../../service-kit/index.js';
import { PG_URL, pgAvailable, freshSchema, dropSchema } from './pg-fixture.js';
import { freePort } from '../helpers/ports.js';

test('a host list, ports, IPv6 and the session attribute', () => {
  const t = parsePostgresUrl(
    'postgres://app:s3cret@db1:5433,db2,[::1]:6000/ctl?sslmode=disable&target_session_attrs=read-write',
  );
  assert.equal(t.hosts, [
    { host: 'db1', port: 5433 },
    { host: 'db2', port: 5432 },
    { host: '::1', port: 6000 },
  ]);
  assert.ok(t.readWrite);
  // One host each, the rest as written, without the attribute node-postgres does not know.
  assert.is(t.urlFor(0), 'postgres://app:s3cret@db1:5433/ctl?sslmode=disable');
  assert.is(t.urlFor(2), 'postgres://app:s3cret@[::1]:6000/ctl?sslmode=disable');
  assert.throws(() => t.urlFor(3), /names 3/);
  const one = parsePostgresUrl('postgresql://u@h/db');
  assert.equal(one.hosts, [{ host: 'h', port: 5432 }]);
  assert.not.ok(one.readWrite);
  assert.is(parsePostgresUrl('postgres://u@h/db?target_session_attrs=any').readWrite, false);
});

test('a bad host list or session attribute is refused by name, never with the password', () => {
  const refused = (url: string, why: RegExp) =>
    assert.throws(
      () => parsePostgresUrl(url),
      (e: Error) => e instanceof RangeError && why.test(e.message) && !e.message.includes('s3cret'),
    );
  refused('postgres://u:s3cret@a,,b/db', /host '': expected host or host:port/);
  refused('postgres://u:s3cret@a:70000/db', /port must be 1–65535/);
  refused('postgres://u:s3cret@a:0/db', /port must be 1–65535/);
  refused('postgres://u:s3cret@a:x/db', /expected host or host:port/);
  refused('postgres://u:s3cret@a/db?target_session_attrs=read-only', /expected any or read-write/);
  refused('postgres://u:s3cret@a/db?target_session_attrs=standby', /expected any or read-write/);
  refused('mysql://u:s3cret@a/db', /expected postgres/);
});

test('the rotation: the host that failed hands over to the next, once, and wraps', () => {
  const r = createHostRotation(parsePostgresUrl('postgres://u@a,b,c/db'));
  assert.is(r.current(), 0);
  r.failed(0);
  assert.is(r.current(), 1);
  // A second caller that saw host 0 fail too does not skip host 1.
  r.failed(0);
  assert.is(r.current(), 1);
  r.failed(1);
  r.failed(2);
  assert.is(r.current(), 0);
});

/** A TCP relay to PostgreSQL that can be cut: a stand-in for a primary that dies. */
async function relayTo(port: number): Promise<{ port: number; cut(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((inbound) => {
    const outbound = connect(port, '127.0.0.1');
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => sockets.delete(s));
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as { port: number }).port,
    async cut() {
      const closed = new Promise<void>((r) => server.close(() => r()));
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}

test('a pool over two hosts: the first one dies, the next statements run on the second', async () => {
  if (!(await pgAvailable())) {
    console.log(`SKIPPED multi-host: PostgreSQL at ${PG_URL} is unreachable`);
    return;
  }
  const u = new URL(PG_URL);
  const relay = await relayTo(Number(u.port || 5432));
  const dead = await freePort();
  const multi = `postgres://${u.username}@127.0.0.1:${dead},127.0.0.1:${relay.port},${u.hostname}:${
    u.port || 5432
  }${u.pathname}?target_session_attrs=read-write`;
  const schema = freshSchema();
  const db = await openDatabase(multi, { schema, poolSize: 2 });
  try {
    // Nothing listens on the first host: the relay serves.
    await db.exec('CREATE TABLE t (n INTEGER)');
    await db.run('INSERT INTO t (n) VALUES (?)', [1]);
    const via = async () => (await db.get<{ port: number }>('SELECT inet_client_port() AS port'))!.port;
    const viaRelay = await via();
    await relay.cut();
    // The statement that was on the cut connection may fail (503); after it, the third host serves.
    const outcomes: string[] = [];
    for (let i = 0; i < 3; i++)
      outcomes.push(
        await db.run('INSERT INTO t (n) VALUES (?)', [2 + i]).then(
          () => 'ok',
          (e: Error) => (e instanceof DatabaseUnavailableError ? 'unavailable' : e.message),
        ),
      );
    assert.ok(
      outcomes.every((o) => o === 'ok' || o === 'unavailable'),
      outcomes.join(),
    );
    assert.is(outcomes.at(-1), 'ok');
    assert.is.not(await via(), viaRelay);
    assert.equal(await db.tx((q) => q.get('SELECT count(*)::int AS n FROM t')), {
      n: 1 + outcomes.filter((o) => o === 'ok').length,
    });
  } finally {
    await db.close();
    await relay.cut().catch(() => {});
    await dropSchema(schema);
  }
});

test('read-write asked of a host that refuses writes: 503 unavailable, nothing run there', async () => {
  if (!(await pgAvailable())) {
    console.log(`SKIPPED multi-host: PostgreSQL at ${PG_URL} is unreachable`);
    return;
  }
  const u = new URL(PG_URL);
  // A session that is read-only is what a standby's is (libpq's read-write test reads the same).
  const readOnly = `${PG_URL}?options=-c%20default_transaction_read_only%3Don&target_session_attrs=read-write`;
  const db = await openDatabase(readOnly, { poolSize: 1 });
  try {
    const e = await db.get('SELECT 1 AS one').then(
      () => undefined,
      (x: unknown) => x,
    );
    assert.ok(e instanceof NotReadWriteError, String(e));
    assert.is((e as DatabaseUnavailableError).status, 503);
    assert.match((e as Error & { cause: Error }).cause.message, `${u.hostname}:${u.port || 5432} does not accept`);
  } finally {
    await db.close();
  }
  // Without the attribute, the same read-only session is served (as node-postgres always did).
  const plain = await openDatabase(readOnly.replace('&target_session_attrs=read-write', ''), { poolSize: 1 });
  try {
    assert.equal(await plain.get('SELECT 1 AS one'), { one: 1 });
  } finally {
    await plain.close();
  }
});

test.run();
