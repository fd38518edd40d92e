/**
 * Review finding 5: an external rail whose pay() lost its answer and whose outcome() cannot be
 * reached says nothing about the payment. It may have been made, so the reservation is held
 * (`payment_unconfirmed`) for reconcile, never released: the agent cannot make the rail pay past
 * the budget by retrying.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { sqliteDb, startTestGateway, createSession, proxy, call, startMerchant } from './helpers.js';
import type { Rail } from '../../gateway/payments/rail.js';

test(
  'pay() times out and outcome() throws: payment_unconfirmed, reserved, and the rail ' + 'never pays past the budget',
  async () => {
    const paid = new Map<string, bigint>();
    let reachable = false;
    const rail: Rail = {
      name: 'ledger',
      async pay(o) {
        paid.set(o.paymentId, o.amount);
        throw new Error('ETIMEDOUT reading response');
      },
      async outcome(id) {
        if (!reachable) throw new Error('ECONNRESET');
        return paid.has(id) ? { txRef: `txid:${id}` } : undefined;
      },
    };
    const db = sqliteDb();
    const gw = await startTestGateway(db, { rail });
    const m = await startMerchant({ amount: '400' });
    try {
      const s = await createSession(gw, { budget: { amount: '1000', currency: 'USD' }, purposes: ['api:search'] });
      const codes: string[] = [];
      for (let i = 0; i < 4; i++)
        codes.push(
          (await proxy(gw, s.sessionToken, `${m.url}/x`, { purpose: 'api:search', method: 'GET' })).body?.error?.code,
        );
      assert.equal(codes, ['payment_unconfirmed', 'payment_unconfirmed', 'budget_exceeded', 'budget_exceeded']);
      const railPaid = [...paid.values()].reduce((a, b) => a + b, 0n);
      assert.is(railPaid, 800n, 'the rail paid no more than the budget allows');
      let v = (await call(gw.url, 'GET', `/sessions/${s.sessionId}`, { key: gw.ownerKey })).body;
      assert.equal([v.spentMinor, v.reservedMinor], ['0', '800']);
      // Once the rail answers, reconcile commits what it paid.
      reachable = true;
      assert.equal(await gw.gw.reconcile(0), { committed: 2, released: 0 });
      v = (await call(gw.url, 'GET', `/sessions/${s.sessionId}`, { key: gw.ownerKey })).body;
      assert.equal([v.spentMinor, v.reservedMinor], ['800', '0']);
    } finally {
      await gw.close();
      await m.close();
      await db.drop();
    }
  },
);

test.run();
