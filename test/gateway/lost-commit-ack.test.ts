/**
 * A payment whose commit went through but whose acknowledgement was lost (the database dropped the
 * connection just after COMMIT): the agent is told it paid (502 `paid_response_lost` with the
 * receipt), never a retryable `503 unavailable` that the next call would pay again (PROTOCOL.md §7).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createGatewayClient, GatewayError } from '../../src/client/index.js';
import { DatabaseUnavailableError } from '../../service-kit/index.js';
import { sqliteDb, startTestGateway, createSession, startMerchant, call, proxy } from './helpers.js';

/** A test database whose transaction writing the ledger commits, then reports the connection lost (once armed). */
function losingCommitAck() {
  const tdb = sqliteDb();
  const state = { armed: false };
  const open = tdb.open;
  tdb.open = async () => {
    const db = await open();
    const tx = db.tx.bind(db);
    (db as any).tx = async (fn: any, o: any) => {
      let ledger = false;
      const out = await tx(
        async (t: any) =>
          fn(
            new Proxy(t, {
              get(target, p) {
                const v = target[p];
                if (typeof v !== 'function') return v;
                return (sql: string, ...rest: unknown[]) => {
                  if (typeof sql === 'string' && /INSERT INTO gw_ledger/.test(sql)) ledger = true;
                  return v.call(target, sql, ...rest);
                };
              },
            }),
          ),
        o,
      );
      if (state.armed && ledger) {
        state.armed = false;
        throw new DatabaseUnavailableError(new Error('Connection terminated unexpectedly'));
      }
      return out;
    };
    return db;
  };
  return { tdb, state };
}

test(
  'a commit whose acknowledgement is lost answers paid_response_lost with the receipt; ' +
    'the client does not pay again',
  async () => {
    const { tdb, state } = losingCommitAck();
    const gw = await startTestGateway(tdb);
    const merchant = await startMerchant({ amount: '100' });
    try {
      const s = await createSession(gw);
      state.armed = true;
      const session = createGatewayClient({ baseUrl: gw.url }).session(s.sessionToken);
      let err: unknown;
      try {
        await session.fetch(`${merchant.url}/a`, { purpose: 'api:search' });
      } catch (e) {
        err = e;
      }
      assert.ok(err instanceof GatewayError, String(err));
      assert.is((err as GatewayError).code, 'paid_response_lost');
      assert.match(String((err as GatewayError).receiptId), /^rcpt_/);
      assert.not.match(
        (err as GatewayError).message,
        /Connection terminated/,
        "the database's own text is the operator's, not the agent's",
      );
      const receipts = (await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey })).body
        .receipts;
      assert.is(receipts.length, 1, 'one payment, one receipt');
      assert.is(receipts[0].receiptId, (err as GatewayError).receiptId);
    } finally {
      await merchant.close();
      await gw.close();
      await tdb.drop();
    }
  },
);

test('without an Idempotency-Key too (curl): the answer says it paid and names the receipt', async () => {
  const { tdb, state } = losingCommitAck();
  const gw = await startTestGateway(tdb);
  const merchant = await startMerchant({ amount: '100' });
  try {
    const s = await createSession(gw);
    state.armed = true;
    const r = await proxy(gw, s.sessionToken, `${merchant.url}/b`, { purpose: 'api:search' });
    assert.is(r.status, 502, r.text);
    assert.is(r.body?.error?.code, 'paid_response_lost');
    const receipts = (await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey })).body
      .receipts;
    assert.is(receipts.length, 1);
    assert.is(r.headers.get('x-ctl-receipt-id'), receipts[0].receiptId);
  } finally {
    await merchant.close();
    await gw.close();
    await tdb.drop();
  }
});

test.run();
