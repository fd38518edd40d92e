/**
 * Review findings 4 and 6: reconcile() must reach every open payment (rows still pending at the
 * rail rotate to the back, a row whose rail outcome throws does not end the pass), and must never
 * release a row that turned `paying` between its read and its release. On SQLite, and on a fresh
 * PostgreSQL schema when one is reachable.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { sqliteDb, postgresDb, startTestGateway, createSession, call, type TestDb } from './helpers.js';
import type { SqlDatabase } from '../../service-kit/index.js';
import { insertX402 } from '../../gateway/payments/schemes/x402/store.js';
import { OPEN_PAYMENTS_SQL } from '../../gateway/payments/store/payments.js';

const PAYEE = '0x4444444444444444444444444444444444444444';
const USDC = '0x036cbd53842c5426634e7929541ec2318f3dcf7e';
const later = () => new Date(Date.now() + 86400_000).toISOString().replace(/\.\d+Z$/, 'Z');

async function openRow(
  db: SqlDatabase,
  id: string,
  sessionId: string,
  state: 'reserved' | 'paying',
  at: number,
  amount = 1,
) {
  await db.run(
    `INSERT INTO gw_payments (id, session_id, state, amount, currency, merchant, address, purpose, rail, created_at,
      updated_at)
    VALUES (?, ?, ?, ?, 'USDC', 'm', ?, 'api:search', 'x402', ?, ?)`,
    [id, sessionId, state, amount, PAYEE, at, at],
  );
  await db.run(`UPDATE gw_sessions SET reserved = reserved + ? WHERE id = ?`, [amount, sessionId]);
}

for (const kind of ['sqlite', 'postgres'] as const) {
  test(
    `${kind}: 200+ pending rows and a row whose rail outcome throws do not starve a stale ` +
      'reservation; pending rows rotate',
    async () => {
      const tdb = kind === 'sqlite' ? sqliteDb() : await postgresDb('reconcile pass on PostgreSQL');
      if (!tdb) return;
      const gw = await startTestGateway(tdb, {
        x402: {
          assets: new Map([['USDC', [{ network: 'eip155:84532', asset: USDC }]]]),
          chain: () => ({
            readContract: async () => {
              throw new Error('RPC down');
            },
          }),
        },
      });
      try {
        const attacker = await createSession(gw, {
          budget: { amount: '100000', currency: 'USDC' },
          purposes: ['api:search'],
          expiresAt: later(),
        });
        const victim = await createSession(gw, {
          budget: { amount: '1000', currency: 'USDC' },
          purposes: ['api:search'],
          expiresAt: later(),
        });
        const t0 = Date.now() - 3600_000;
        // The oldest: an expired authorization whose chain read throws.
        await openRow(gw.db, 'pay_throws', attacker.sessionId, 'paying', t0 - 1);
        await insertX402(
          gw.db,
          {
            paymentId: 'pay_throws',
            version: 'v2',
            network: 'eip155:84532',
            asset: USDC,
            payTo: PAYEE,
            payer: PAYEE,
            nonce: `0x${'03'.repeat(32)}`,
            validBefore: t0,
          },
          t0,
        );
        // 210 sent authorizations, still cashable: pending, every pass.
        for (let i = 0; i < 210; i++) {
          const id = `pay_pending_${String(i).padStart(3, '0')}`;
          await openRow(gw.db, id, attacker.sessionId, 'paying', t0);
          await insertX402(
            gw.db,
            {
              paymentId: id,
              version: 'v2',
              network: 'eip155:84532',
              asset: USDC,
              payTo: PAYEE,
              payer: PAYEE,
              nonce: `0x${i.toString(16).padStart(64, '0')}`,
              validBefore: Date.now() + 3600_000,
            },
            t0,
          );
        }
        // The newest stale row: a reservation that never reached the rail.
        await openRow(gw.db, 'pay_crash', victim.sessionId, 'reserved', t0 + 1, 500);
        const started = Date.now();
        assert.equal(await gw.gw.reconcile(60_000), { committed: 0, released: 1 });
        const v = (await call(gw.url, 'GET', `/sessions/${victim.sessionId}`, { key: gw.ownerKey })).body;
        assert.is(v.reservedMinor, '0', 'the never-sent reservation is released in the same pass');
        const pend = await gw.db.get(
          `SELECT MIN(updated_at) AS lo, COUNT(*) AS n FROM gw_payments WHERE id LIKE 'pay_pending_%' ` +
            `AND state = 'paying'`,
        );
        assert.is(Number(pend!.n), 210, 'pending rows are kept');
        assert.ok(Number(pend!.lo) >= started, 'pending rows went to the back of the queue');
        const throws = await gw.db.get(`SELECT state FROM gw_payments WHERE id = 'pay_throws'`);
        assert.is(throws!.state, 'paying', 'a row whose rail outcome threw stays open for the next pass');
      } finally {
        await gw.close();
        await tdb.drop();
      }
    },
  );

  test(`${kind}: reconcile's page of open payments is read through the index of open rows only`, async () => {
    const tdb = kind === 'sqlite' ? sqliteDb() : await postgresDb('open-payments index on PostgreSQL');
    if (!tdb) return;
    const gw = await startTestGateway(tdb);
    try {
      const params = [Date.now(), -1, -1, '', 200];
      let plan: string;
      if (kind === 'sqlite') {
        plan = (await gw.db.all<{ detail: string }>(`EXPLAIN QUERY PLAN ${OPEN_PAYMENTS_SQL}`, params))
          .map((r) => r.detail)
          .join('\n');
      } else {
        // A fresh table is small enough for a sequential scan: rule it out, so the plan says
        // which index the planner can match to the query's WHERE.
        plan = await gw.db.tx(async (t) => {
          await t.exec('SET LOCAL enable_seqscan = off');
          return (await t.all<{ 'QUERY PLAN': string }>(`EXPLAIN ${OPEN_PAYMENTS_SQL}`, params))
            .map((r) => r['QUERY PLAN'])
            .join('\n');
        });
      }
      assert.match(plan, /gw_payments_open_only/, plan);
      const defs =
        kind === 'sqlite'
          ? await gw.db.all<{ sql: string }>(
              `SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'gw_payments' AND sql IS NOT NULL`,
            )
          : await gw.db.all<{ sql: string }>(
              `SELECT indexdef AS sql FROM pg_indexes WHERE tablename = 'gw_payments' AND schemaname ` +
                '= current_schema()',
            );
      // No index left that holds every payment ever made by its state.
      assert.not.ok(
        defs.some((d) => /gw_payments (USING btree )?\(state\b/i.test(d.sql)),
        defs.map((d) => d.sql).join('\n'),
      );
    } finally {
      await gw.close();
      await tdb.drop();
    }
  });

  test(`${kind}: a stale reserved row that turns paying before its release is not released`, async () => {
    const base = kind === 'sqlite' ? sqliteDb() : await postgresDb('reconcile race on PostgreSQL');
    if (!base) return;
    // Another instance's markPaying lands between reconcile's read of the row and its release.
    // Staged on the release's own transaction (told by its text), not whichever transaction comes
    // first: the gateway's background work (audit sealing) also opens transactions, and one of
    // those taking the hook would race its UPDATE with the release instead of preceding it.
    let armed = false;
    const isRelease = (fn: unknown) => String(fn).includes("SET state = 'released'");
    const wrap = (db: SqlDatabase): SqlDatabase =>
      new Proxy(db, {
        get(t, k) {
          const v = Reflect.get(t, k);
          if (k === 'tx' && armed) {
            return async (...args: unknown[]) => {
              if (!isRelease(args[0])) return (v as Function).apply(t, args);
              armed = false;
              await t.run(
                `UPDATE gw_payments SET state = 'paying', updated_at = ? WHERE id = 'pay_race' AND state = 'reserved'`,
                [Date.now()],
              );
              return (v as Function).apply(t, args);
            };
          }
          return typeof v === 'function' ? v.bind(t) : v;
        },
      });
    const tdb: TestDb = { ...base, open: async () => wrap(await base.open()) };
    const gw = await startTestGateway(tdb, {
      x402: { assets: new Map([['USDC', [{ network: 'eip155:84532', asset: USDC }]]]) },
    });
    try {
      const s = await createSession(gw, {
        budget: { amount: '1000', currency: 'USDC' },
        purposes: ['api:search'],
        expiresAt: later(),
      });
      await openRow(gw.db, 'pay_race', s.sessionId, 'reserved', Date.now() - 3600_000, 500);
      armed = true;
      await gw.gw.reconcile(60_000);
      assert.is(armed, false, 'the race was staged');
      const row = await gw.db.get(`SELECT state FROM gw_payments WHERE id = 'pay_race'`);
      assert.is(row!.state, 'paying');
      const v = (await call(gw.url, 'GET', `/sessions/${s.sessionId}`, { key: gw.ownerKey })).body;
      assert.is(v.reservedMinor, '500', 'the payment now on its way keeps its reservation');
    } finally {
      await gw.close();
      await base.drop();
    }
  });
}

test.run();
