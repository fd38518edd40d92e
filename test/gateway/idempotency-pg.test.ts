/**
 * Idempotency-Key on PostgreSQL (gateway/README.md): keys live in the database, so two gateway
 * instances on one database, and a restarted one, answer a key alike and never pay it twice.
 */
import { test } from 'uvu';
import {
  postgresDb,
  startTestGateway,
  startMerchant,
  type TestDb,
  type TestGateway,
  type Merchant,
} from './helpers.js';
import {
  slowRail,
  retryReplays,
  concurrentOnePayment,
  crashThenRetry,
  replayAfterRestart,
  expiredKeysPruned,
} from './idempotency-cases.js';

async function onPostgres(what: string, fn: (db: TestDb, m: Merchant) => Promise<void>) {
  const db = await postgresDb(what);
  if (!db) return;
  const m = await startMerchant({ amount: '100' });
  try {
    await fn(db, m);
  } finally {
    await m.close();
    await db.drop();
  }
}

test('two instances on one PostgreSQL: a retry through the other instance is the replay', () =>
  onPostgres('idempotency across instances', async (db, m) => {
    const a = await startTestGateway(db);
    const b = await startTestGateway(db, {}, a.ownerKey);
    try {
      await retryReplays(a, m, b);
    } finally {
      await a.close();
      await b.close();
    }
  }));

test('two instances, one key at once: one payment', () =>
  onPostgres('idempotency concurrency across instances', async (db, m) => {
    let a: TestGateway | undefined;
    let b: TestGateway | undefined;
    a = await startTestGateway(db, { rail: slowRail(() => a!.db, 150) });
    b = await startTestGateway(db, { rail: slowRail(() => b!.db, 150) }, a.ownerKey);
    try {
      await concurrentOnePayment(a, b, m);
    } finally {
      await a.close();
      await b.close();
    }
  }));

test('after a restart the key still answers', () =>
  onPostgres('idempotency after a restart', (db, m) => replayAfterRestart(db, m)));

for (const payFirst of [true, false]) {
  test(`a kill mid-payment (${payFirst ? 'after' : 'before'} the rail paid), reconcile, retry: no second payment`, () =>
    onPostgres('idempotency after a crash', (db, m) => crashThenRetry(db, m, payFirst)));
}

test('expired keys are claimed afresh and pruned', () =>
  onPostgres('idempotency pruning', async (db, m) => {
    const gw = await startTestGateway(db);
    try {
      await expiredKeysPruned(gw, m);
    } finally {
      await gw.close();
    }
  }));

test.run();
