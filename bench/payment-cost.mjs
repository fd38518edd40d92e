#!/usr/bin/env node
// What one paid request costs the gateway's database, per kind of session: plain (the lifetime
// total alone), two windows (P1D and P1M, PROTOCOL.md §13: every payment counts on the lifetime
// total and both windows) and a child session (§14: on the child and its parent). Per payment:
// SQL transactions, statements and round trips to the database (counted by wrapping the
// SqlDatabase in the bench gateway process; a round trip is a statement, or a BEGIN or COMMIT),
// the CPU of the PostgreSQL backends serving the gateway (from /proc, other clients excluded), the
// fsync/fdatasync calls of the gateway process (strace, when it can attach; on PostgreSQL also
// the server's WAL syncs) and the HTTP round trips to the merchant. N paid requests after a
// warm-up (sequential, or on --conns connections).
//
//   npm run compile && node bench/payment-cost.mjs [--n 1000] [--db postgres] [--conns 50]
//     [--cases plain,windows,child] [--root <another checkout, compiled>] [--store-only]
//
// --store-only (PostgreSQL): no gateway, merchant or HTTP, only the store's paid-payment change
// (payLedgerInCommit: the budget guard, the payment, the ledger row, a 1.5 KB receipt), run --n
// times in a row per case on one connection, rounds alternating between cases: the CPU of that
// one backend per payment, the database's own cost of a payment without the rest of a request
// (sessions read, the audit and transparency logs), which a loaded machine hardly moves.
//
// --root runs another checkout's gateway (its build/ and its bench/lib), e.g. main's code beside
// this one's: `git worktree add /tmp/main main && (cd /tmp/main && npm run compile)`.
import http from 'node:http';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { randomBytes } from 'node:crypto';

const argOf = (name, d) =>
  process.argv.includes(`--${name}`) ? process.argv[process.argv.indexOf(`--${name}`) + 1] : d;
const n = Number(argOf('n', 1000));
const pg = argOf('db', 'sqlite') === 'postgres';
const conns = Number(argOf('conns', 1)); // > 1: concurrent, to see commits grouped
const cases = argOf('cases', 'plain,windows,child').split(',');
const root = argOf('root', undefined);
const procs = root
  ? await import(pathToFileURL(join(resolve(root), 'bench', 'lib', 'gateway-procs.mjs')).href)
  : await import('./lib/gateway-procs.mjs');
const {
  startMerchant,
  startGateway,
  stop,
  createOwner,
  createSession,
  paidRequest,
  pgReachable,
  dropSchema,
  backendTicks,
  ticksBetween,
} = procs;
const pgUrl = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
if (pg && !(await pgReachable(pgUrl))) throw new Error(`${pgUrl} is unreachable`);

/** A session of `kind`, its budget far above what the run spends. */
async function sessionOf(kind, url, owner) {
  if (kind === 'plain') return createSession(url, owner);
  if (kind === 'windows')
    return createSession(url, owner, undefined, {
      windows: [
        { every: 'P1D', maxAmountMinor: '9000000000000000' },
        { every: 'P1M', maxAmountMinor: '9000000000000000' },
      ],
    });
  const parent = await createSession(url, owner);
  const child = await (
    await fetch(`${url}/sessions/${parent.sessionId}/children`, {
      method: 'POST',
      headers: { authorization: `Bearer ${parent.sessionToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ budget: { amount: '9000000000000000' } }),
    })
  ).json();
  if (!child.sessionToken) throw new Error(`child session: ${JSON.stringify(child)}`);
  return child;
}

async function runCase(kind) {
  const dir = mkdtempSync(join(tmpdir(), 'ctl-cost-'));
  const countsFile = join(dir, 'counts.json');
  const schema = pg ? `ctl_cost_${randomBytes(4).toString('hex')}` : undefined;
  const env = {
    BENCH_SQL_COUNTS: countsFile,
    ...(pg ? { BENCH_DB: pgUrl, BENCH_SCHEMA: schema } : { BENCH_DB: `sqlite:${join(dir, 'gateway.db')}` }),
  };
  const merchant = await startMerchant();
  const shop = `http://127.0.0.1:${merchant.info.port}`;
  const gw = await startGateway(env);
  const snapshot = async () => {
    gw.child.kill('SIGUSR2');
    await new Promise((r) => setTimeout(r, 200));
    const sql = JSON.parse(readFileSync(countsFile, 'utf8'));
    const m = await (await fetch(`${shop}/__count`)).json();
    return { sql, m };
  };
  try {
    const owner = await createOwner(gw.info.url, 'cost');
    const session = await sessionOf(kind, gw.info.url, owner);
    const agent = new http.Agent({ keepAlive: true, maxSockets: conns });
    for (let i = 0; i < 100; i++) await paidRequest(agent, gw.info.url, session.sessionToken, shop);
    // PostgreSQL's own WAL flush count (server-wide: other databases' commits count too, so run on a quiet server).
    const walSyncs = async () => {
      if (!pg) return 0;
      const c = new (await import('pg')).default.Client({ connectionString: pgUrl });
      await c.connect();
      const r = await c.query('SELECT wal_sync FROM pg_stat_wal').catch(() => ({ rows: [{ wal_sync: NaN }] }));
      await c.end();
      return Number(r.rows[0].wal_sync);
    };
    const a = await snapshot();
    const wal0 = await walSyncs();
    // strace counts fsync-family calls of every gateway thread (better-sqlite3 writes on the main thread).
    const tracer = spawn(
      'strace',
      ['-f', '-c', '-e', 'trace=fsync,fdatasync,sync_file_range', '-p', String(gw.info.pid)],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let straceOut = '';
    tracer.stderr.on('data', (d) => (straceOut += d));
    tracer.on('error', () => {});
    await new Promise((r) => setTimeout(r, 500));
    let ok = 0;
    const pg0 = pg ? backendTicks(gw.info.pid) : undefined;
    const t0 = performance.now();
    let sent = 0;
    await Promise.all(
      Array.from({ length: conns }, async () => {
        while (sent++ < n) if ((await paidRequest(agent, gw.info.url, session.sessionToken, shop)) === 200) ok++;
      }),
    );
    const ms = performance.now() - t0;
    const pg1 = pg ? backendTicks(gw.info.pid) : undefined;
    tracer.kill('SIGINT');
    await new Promise((r) => tracer.once('exit', r).once('error', r));
    const b = await snapshot();
    const wal1 = await walSyncs();
    agent.destroy();
    const per = (x, y) => ((y - x) / n).toFixed(2);
    const d = (k) => (b.sql[k] ?? 0) - (a.sql[k] ?? 0);
    console.log(
      `${kind}, ${pg ? 'PostgreSQL' : 'SQLite'}: ${n} paid requests on ${conns} connection(s) (${ok} ` +
        `answered 200), ${((ms / n) * conns).toFixed(2)} ms each`,
    );
    // A round trip: each statement, and each transaction's BEGIN and COMMIT (a group commit's
    // statements share theirs; at one connection a group is one statement, autocommitted).
    console.log(
      `  per payment: transactions ${(d('tx') / n).toFixed(2)}, statements ${(d('statements') / n).toFixed(2)}, ` +
        `round trips ${((d('statements') + 2 * d('tx')) / n).toFixed(2)}` +
        (pg ? `, PostgreSQL CPU ${((ticksBetween(pg0, pg1) * 10_000) / n).toFixed(0)} µs` : ''),
    );
    console.log(
      `  statements in a group commit  ${per(a.sql.grouped ?? 0, b.sql.grouped ?? 0)} (outside a transaction: ` +
        `${per(a.sql.outsideTx, b.sql.outsideTx)})`,
    );
    for (const v of Object.keys(b.sql.byVerb).sort())
      console.log(`    ${v.padEnd(10)} ${per(a.sql.byVerb[v] ?? 0, b.sql.byVerb[v])}`);
    console.log('  statements per payment (≥ 0.05), "tx" = inside a transaction, "grouped" = in a group commit:');
    for (const [text, c] of Object.entries(b.sql.bySql)
      .map(([k, v]) => [k, (v - (a.sql.bySql[k] ?? 0)) / n])
      .filter(([, v]) => v >= 0.05)
      .sort((x, y) => y[1] - x[1]))
      console.log(`    ${c.toFixed(2)}  ${text}`);
    console.log(
      `  gateway → merchant per payment ${per(a.m.unpaid402 + a.m.paid, b.m.unpaid402 + b.m.paid)} ` +
        `(402: ${per(a.m.unpaid402, b.m.unpaid402)}, paid retry: ${per(a.m.paid, b.m.paid)})`,
    );
    const calls = [...straceOut.matchAll(/^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$/gm)].filter(
      (x) => x[2] !== 'total',
    );
    if (pg)
      console.log(
        `  PostgreSQL WAL syncs (pg_stat_wal.wal_sync, server-wide) per payment: ${((wal1 - wal0) / n).toFixed(2)}`,
      );
    if (calls.length || /total|attached/.test(straceOut))
      console.log(
        `  fsync-family calls (gateway process) per payment: ` +
          (calls.map((x) => `${x[2]} ${(Number(x[1]) / n).toFixed(3)}`).join(', ') || '0'),
      );
    else console.log(`  fsync count: strace could not attach (${straceOut.trim().split('\n')[0] || 'no output'})`);
  } finally {
    await stop(gw.child);
    await stop(merchant.child);
    rmSync(dir, { recursive: true, force: true });
    if (schema) await dropSchema(pgUrl, schema);
  }
}

/** The store's paid-payment change alone, per case (--store-only). */
async function storeOnly() {
  const build = (p) => import(pathToFileURL(join(root ? resolve(root) : process.cwd(), 'build', p)).href);
  const [{ openDatabase }, { migrate }, { GATEWAY_ALL_MIGRATIONS }, { insertSession }] = await Promise.all([
    build('service-kit/index.js'),
    build('service-kit/migrate.js'),
    build('gateway/server.js'),
    // gateway/store/sessions.js before the rooms (an older checkout under --root).
    build('gateway/sessions/store.js').catch(() => build('gateway/store/sessions.js')),
  ]);
  // Where the store lived before payments/store/ (so --root can name an older checkout).
  const store = await build('gateway/payments/store/payments.js').catch(() => build('gateway/payments/store.js'));
  const counters = await build('gateway/payments/store/counters.js').catch(() => build('gateway/payments/counters.js'));
  const schema = `ctl_cost_${randomBytes(4).toString('hex')}`;
  const db = await openDatabase(pgUrl, { schema, poolSize: 1 });
  try {
    await migrate(db, [...GATEWAY_ALL_MIGRATIONS]);
    const backend = (await db.get('SELECT pg_backend_pid() AS p')).p;
    const ticks = () => {
      const f = readFileSync(`/proc/${backend}/stat`, 'utf8');
      const r = f.slice(f.lastIndexOf(')') + 2).split(' ');
      return Number(r[11]) + Number(r[12]);
    };
    const now = Date.now();
    const big = '9000000000000000';
    const windows = [
      { every: 'P1D', maxAmountMinor: big },
      { every: 'P1M', maxAmountMinor: big },
    ];
    const session = (id, extra = {}) =>
      insertSession(db, {
        ...{ id, ownerId: 'own_cost', tokenHash: `t_${id}`, label: id, currency: 'USD', ceiling: BigInt(big) },
        ...{ expiresAt: now + 86_400_000, createdAt: now, config: {}, policyHash: 'h', grantId: `g_${id}` },
        ...{ grant: {}, actorKeyPem: 'k', softLimit: null, maxPerHour: null, maxPerMerchantDay: null },
        ...{ webhookUrl: null, webhookSecret: null, thresholds: [] },
        ...extra,
      });
    await session('sess_plain');
    await session('sess_windows', { config: { windows }, windowsStart: now });
    await session('sess_parent');
    await session('sess_child', { parentId: 'sess_parent', path: '/sess_parent/sess_child/', depth: 1 });
    const inputs = {
      plain: { sessionId: 'sess_plain' },
      windows: {
        sessionId: 'sess_windows',
        chain: ['sess_windows'],
        chainWindows: counters.chainWindowKeys([{ id: 'sess_windows', windows, windowsStart: now }], now),
      },
      child: { sessionId: 'sess_child', chain: ['sess_child', 'sess_parent'], chainWindows: [] },
    };
    let k = 0;
    const pay = async (kind) => {
      const id = `pay_${k++}_${randomBytes(4).toString('hex')}`;
      const input = { ...inputs[kind], paymentId: id, amount: 1n, currency: 'USD', merchant: 'm', address: 'a' };
      const paid = { txRef: `txid:${id}`, receiptId: `rcpt_${id}`, receipt: 'x'.repeat(1500) };
      const r = await store.payLedgerInCommit(db, {
        ...input,
        ...paid,
        purpose: 'api:search',
        rail: 'ledger',
        now: Date.now(),
        paidAt: Date.now(),
        velocity: false,
      });
      if (!r.committed) throw new Error(`${kind}: not committed`);
    };
    const used = Object.fromEntries(cases.map((c) => [c, 0]));
    for (const kind of cases) for (let i = 0; i < 100; i++) await pay(kind);
    const rounds = 4;
    for (let round = 0; round < rounds; round++)
      for (const kind of cases) {
        const t0 = ticks();
        for (let i = 0; i < n / rounds; i++) await pay(kind);
        used[kind] += ticks() - t0;
      }
    const per = (kind) => (used[kind] * 10_000) / n;
    for (const kind of cases)
      console.log(
        `${kind.padEnd(8)} PostgreSQL backend CPU per payment ${per(kind).toFixed(0).padStart(5)} µs` +
          (cases[0] === 'plain' && kind !== 'plain' ? ` (${(per(kind) / per('plain')).toFixed(2)}× plain)` : ''),
      );
  } finally {
    await db.exec(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {});
    await db.close();
  }
}

console.log(`gateway: ${root ? resolve(root) : 'this checkout'}`);
if (process.argv.includes('--store-only')) await storeOnly();
else for (const kind of cases) await runCase(kind);
