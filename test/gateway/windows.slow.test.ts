/**
 * Two gateway instances on one database racing 200 payments at a budget window's edge
 * (PROTOCOL.md §13), on SQLite and PostgreSQL: neither window ever passes its amount or its
 * count, every refusal is `window_exceeded`, and the books match what the merchant was paid.
 * Slow tier: about 10 s per store on a shared machine (windows.test.ts races 50).
 */
import { test } from 'uvu';
import { sqliteDb, postgresDb, startTestGateway, startMerchant } from './helpers.js';
import type { TestDb } from './helpers.js';
import { raceAtWindowEdge, T0, type WindowEnv as Env } from './window-race.js';

function suite(name: string, open: () => Promise<TestDb | undefined>) {
  let e: Env | undefined;
  test.before(async () => {
    const db = await open();
    if (!db) return;
    const clock = { t: T0 };
    const deps = { now: () => clock.t, maxSessionSeconds: 20 * 365 * 86400 };
    const gw = await startTestGateway(db, deps);
    const gw2 = await startTestGateway(db, deps, gw.ownerKey);
    const m = await startMerchant({ amount: (path) => /^\/p(\d+)/.exec(path)?.[1] ?? '100' });
    e = { db, gw, gw2, m, clock };
  });
  test.after(async () => {
    if (!e) return;
    await e.gw2?.close();
    await e.gw.close();
    await e.m.close();
    await e.db.drop();
  });

  test(`${name}: two instances racing 200 payments at a window's edge never pass it`, async () => {
    if (!e?.gw2) return;
    await raceAtWindowEdge({ ...e, gw2: e.gw2 }, { payments: 200, maxAmountMinor: 500, maxPayments: 40 });
  });
}

suite('SQLite', async () => sqliteDb());
suite('PostgreSQL', () => postgresDb('budget windows raced on PostgreSQL'));

test.run();
