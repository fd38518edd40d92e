/**
 * Idempotency-Key cases shared by the SQLite and PostgreSQL tests: a retry is answered from the
 * key, never paid again, also after a restart and after a crash mid-payment.
 */
import * as assert from 'uvu/assert';
import { createLedgerRail } from '../../gateway/payments/ledger.js';
import { claimKey, pruneExpiredKeys } from '../../gateway/idempotency/store.js';
import type { Rail } from '../../gateway/payments/rail.js';
import {
  startTestGateway,
  createSession,
  call,
  proxy,
  type TestDb,
  type Merchant,
  type TestGateway,
} from './helpers.js';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const never = () => new Promise<never>(() => {});

export function keyed(
  gw: { url: string },
  token: string,
  target: string,
  key: string,
  o: { body?: string; method?: string } = {},
) {
  return proxy(gw, token, target, { purpose: 'api:search', headers: { 'idempotency-key': key }, ...o });
}

export async function books(gw: TestGateway, sessionId: string) {
  const v = await call(gw.url, 'GET', `/sessions/${sessionId}`, { key: gw.ownerKey });
  const led = await gw.db.get<{ n: unknown }>(`SELECT COUNT(*) AS n FROM gw_ledger WHERE status = 'paid'`);
  return { spent: v.body.spentMinor as string, reserved: v.body.reservedMinor as string, ledgerPaid: Number(led!.n) };
}

/** A ledger rail that waits `ms` before paying: two requests with one key overlap for sure. */
export function slowRail(gwDb: () => TestGateway['db'], ms: number): Rail {
  let ledger: ReturnType<typeof createLedgerRail> | undefined;
  const l = () => (ledger ??= createLedgerRail(gwDb()));
  return {
    name: 'ledger',
    pay: async (o) => {
      await sleep(ms);
      return l().pay(o);
    },
    outcome: (id) => l().outcome(id),
  };
}

/** The first answer is replayed with `Idempotent-Replayed: true`; the merchant saw one paid request. */
export async function retryReplays(gw: TestGateway, m: Merchant, retryVia: TestGateway = gw) {
  const s = await createSession(gw);
  const first = await keyed(gw, s.sessionToken, `${m.url}/item`, 'k-retry-1', { body: 'q=1' });
  assert.is(first.status, 200, first.text);
  assert.is(first.headers.get('idempotent-replayed'), null);
  const again = await keyed(retryVia, s.sessionToken, `${m.url}/item`, 'k-retry-1', { body: 'q=1' });
  assert.is(again.status, 200);
  assert.is(again.headers.get('idempotent-replayed'), 'true');
  assert.is(again.text, first.text, 'the same body');
  assert.is(again.headers.get('x-ctl-receipt-id'), first.headers.get('x-ctl-receipt-id'));
  assert.is(again.headers.get('content-type'), first.headers.get('content-type'));
  assert.is(again.headers.get('x-ctl-session-id'), s.sessionId);
  assert.is(m.paid.length, 1, 'the merchant saw one paid request');
  assert.equal(await books(gw, s.sessionId), { spent: '100', reserved: '0', ledgerPaid: 1 });
  return { s, first };
}

/** Eight requests with one key at once (alternating instances): one payment; the others 409 in flight or the replay. */
export async function concurrentOnePayment(a: TestGateway, b: TestGateway, m: Merchant) {
  const s = await createSession(a);
  const all = await Promise.all(
    Array.from({ length: 8 }, (_, i) => keyed(i % 2 ? b : a, s.sessionToken, `${m.url}/c`, 'k-conc')),
  );
  const ran = all.filter((r) => r.status === 200 && r.headers.get('idempotent-replayed') === null);
  assert.is(ran.length, 1, all.map((r) => `${r.status} ${r.text}`).join('\n'));
  const answers = [ran[0]!];
  for (const other of all.filter((r) => r !== ran[0])) {
    if (other.status === 409) {
      assert.is(other.body.error.code, 'conflict');
      assert.is(other.headers.get('retry-after'), '1');
    } else {
      assert.is(other.status, 200);
      assert.is(other.headers.get('idempotent-replayed'), 'true');
      assert.is(other.text, ran[0]!.text);
    }
  }
  assert.is(m.paid.length, 1);
  assert.equal(await books(a, s.sessionId), { spent: '100', reserved: '0', ledgerPaid: 1 });
  // Once done, every retry is the replay.
  const late = await keyed(b, s.sessionToken, `${m.url}/c`, 'k-conc');
  assert.is(late.headers.get('idempotent-replayed'), 'true');
  assert.is(late.text, answers[0]!.text);
}

/**
 * A crash mid-payment (the rail paid, or not, and the process stopped): a retry after the lease is
 * 409 payment_unconfirmed until reconcile settles it, then the settled outcome (paid: 502 naming
 * the receipt; not paid: the request runs afresh), never a second payment.
 */
export async function crashThenRetry(db: TestDb, m: Merchant, payFirst: boolean) {
  let ledger: ReturnType<typeof createLedgerRail> | undefined;
  const rail: Rail = {
    name: 'ledger',
    pay: async (o) => {
      if (payFirst) await ledger!.pay(o);
      return never();
    },
    outcome: (id) => ledger!.outcome(id),
  };
  const a = await startTestGateway(db, { rail, idempotency: { leaseMs: 200 } });
  ledger = createLedgerRail(a.db);
  const s = await createSession(a);
  const abort = new AbortController();
  const pending = fetch(`${a.url}/proxy`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${s.sessionToken}`,
      'x-target-url': `${m.url}/crash`,
      'x-ctl-purpose': 'api:search',
      'idempotency-key': 'k-crash',
    },
    signal: abort.signal,
  }).catch(() => undefined);
  for (let i = 0; i < 100; i++) {
    const row = await a.db.get<{ state: string }>(`SELECT state FROM gw_payments`);
    if (row?.state === 'paying') break;
    await sleep(20);
  }
  abort.abort();
  await pending;
  const owner = a.ownerKey;
  await a.close(); // the "kill": the attempt never finishes, its key row stays in flight

  const b = await startTestGateway(db, { reconcileStaleMs: 60_000 }, owner);
  try {
    const key = await b.db.get<{ state: string; payment_id: string }>(`SELECT state, payment_id FROM gw_idempotency`);
    assert.is(key!.state, 'in_flight');
    const pay = await b.db.get<{ id: string; state: string }>(`SELECT id, state FROM gw_payments`);
    assert.is(pay!.id, key!.payment_id, 'the key row names the payment');
    await sleep(250); // the lease is over
    const early = await keyed(b, s.sessionToken, `${m.url}/crash`, 'k-crash');
    assert.is(early.status, 409, early.text);
    assert.is(early.body.error.code, 'payment_unconfirmed');
    assert.equal(await b.gw.reconcile(0), payFirst ? { committed: 1, released: 0 } : { committed: 0, released: 1 });
    const retry = await keyed(b, s.sessionToken, `${m.url}/crash`, 'k-crash');
    if (payFirst) {
      assert.is(retry.status, 502, retry.text);
      assert.is(retry.body.error.code, 'paid_response_lost');
      assert.is(retry.headers.get('idempotent-replayed'), 'true');
      const receipts = await call(b.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: owner });
      assert.is(retry.headers.get('x-ctl-receipt-id'), receipts.body.receipts[0].receiptId);
      const again = await keyed(b, s.sessionToken, `${m.url}/crash`, 'k-crash');
      assert.is(again.text, retry.text);
      assert.is(m.paid.length, 0, 'the merchant never got the paid retry');
    } else {
      assert.is(retry.status, 200, 'nothing was paid: the request runs afresh under the same key');
      assert.is(retry.headers.get('idempotent-replayed'), null);
      assert.is(m.paid.length, 1);
    }
    assert.equal(await books(b, s.sessionId), { spent: '100', reserved: '0', ledgerPaid: 1 });
  } finally {
    await b.close();
  }
}

/** A new app on the same database answers the key from it. */
export async function replayAfterRestart(db: TestDb, m: Merchant) {
  const a = await startTestGateway(db);
  const s = await createSession(a);
  const first = await keyed(a, s.sessionToken, `${m.url}/restart`, 'k-restart');
  assert.is(first.status, 200);
  const owner = a.ownerKey;
  await a.close();
  const b = await startTestGateway(db, {}, owner);
  try {
    const again = await keyed(b, s.sessionToken, `${m.url}/restart`, 'k-restart');
    assert.is(again.headers.get('idempotent-replayed'), 'true');
    assert.is(again.text, first.text);
    assert.equal(await books(b, s.sessionId), { spent: '100', reserved: '0', ledgerPaid: 1 });
  } finally {
    await b.close();
  }
}

/** A key past its 24 h is claimed afresh by one statement; pruning deletes it. */
export async function expiredKeysPruned(gw: TestGateway, m: Merchant) {
  const s = await createSession(gw);
  const first = await keyed(gw, s.sessionToken, `${m.url}/old`, 'k-old');
  assert.is(first.status, 200);
  const row = await gw.db.get<{ expires_at: unknown; created_at: unknown }>(
    `SELECT expires_at, created_at FROM gw_idempotency`,
  );
  assert.is(Number(row!.expires_at) - Number(row!.created_at), 24 * 3_600_000);
  const later = Number(row!.expires_at) + 1;
  const c = {
    sessionId: s.sessionId,
    key: 'k-old',
    requestHash: 'h',
    attempt: 'a2',
    paymentId: 'pay_2',
    now: later,
    leaseUntil: later + 1000,
    expiresAt: later + 86_400_000,
  };
  assert.is(await claimKey(gw.db, { ...c, now: later - 2 }), false, 'a live key is not claimed again');
  assert.is(await claimKey(gw.db, c), true, 'an expired one is');
  assert.is(await pruneExpiredKeys(gw.db, later), 0);
  assert.is(await pruneExpiredKeys(gw.db, later + 86_400_000), 1);
  assert.is(Number((await gw.db.get<{ n: unknown }>(`SELECT COUNT(*) AS n FROM gw_idempotency`))!.n), 0);
}
