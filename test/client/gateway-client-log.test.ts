/**
 * The agent client follows the gateway's log against a real gateway: it keeps the last checkpoint
 * (in a host store), takes a larger one only with a verified consistency proof, proves a receipt's
 * inclusion at its `X-Ctl-Log-Index`, refuses an edited receipt, and catches a fork signed by the
 * log's own key (another tree shown to this client) without replacing what it kept.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer } from 'node:http';
import { createGatewayClient } from '../../src/client/index.js';
import { migrate, openDatabase } from '../../service-kit/index.js';
import { createTransparencyLog, generateNoteSigner, serviceLogMigrations } from '../../service-kit/tlog/index.js';
import { call, createSession, proxy, sqliteDb, startMerchant, startTestGateway } from '../gateway/helpers.js';
import { serveLog } from '../helpers/log-tamper.js';

test('the client keeps a consistent checkpoint, proves a receipt, and catches a fork', async () => {
  const key = await generateNoteSigner('gateway.test/ctl-gateway-log');
  const merchant = await startMerchant({ amount: '100' });
  const db = sqliteDb();
  const gw = await startTestGateway(db, { log: { skey: key.skey } });
  try {
    const s = await createSession(gw);
    const paid = await proxy(gw, s.sessionToken, `${merchant.url}/search`, { purpose: 'api:search' });
    const index = Number(paid.headers.get('x-ctl-log-index'));
    const list = await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey });
    const receipt = list.body.receipts[0];
    await gw.gw.log!.log.publish();

    let kept: string | undefined;
    const store = { get: () => kept, set: (n: string) => void (kept = n) };
    const log = createGatewayClient({ baseUrl: gw.url }).log(key.vkey, store);
    const first = await log.refresh();
    assert.ok(first.valid, JSON.stringify(first));
    assert.ok(kept, 'kept in the host store');
    assert.equal(await log.verifyReceiptIncluded(receipt, index), { valid: true, checkpoint: first.checkpoint });
    const edited = await log.verifyReceiptIncluded({ ...receipt, amount: { ...receipt.amount, amountMinor: '1' } });
    assert.is(edited.valid, false);
    assert.is((await log.verifyReceiptIncluded(receipt, index + 1)).valid, false, 'another index');

    await proxy(gw, s.sessionToken, `${merchant.url}/search`, { purpose: 'api:search' });
    await gw.gw.log!.log.publish();
    const second = await log.refresh();
    assert.ok(second.valid && second.checkpoint.size > (first.valid ? first.checkpoint.size : 0));
    const good = kept;

    // The same key signs a larger tree that is not an extension of the kept one.
    const forkDb = await openDatabase('sqlite::memory:');
    await migrate(forkDb, serviceLogMigrations('gw_log'));
    const fork = createTransparencyLog({ db: forkDb, prefix: 'gw_log', signer: key });
    await forkDb.tx(async (q) => {
      for (let i = 0; i < 10; i++) await fork.append(q, { type: 'receipt', body: { forged: i } });
    });
    await fork.publish();
    const server = createServer(serveLog(fork));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const forkUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    const forked = await createGatewayClient({ baseUrl: forkUrl }).log(key.vkey, store).refresh();
    assert.is(forked.valid, false);
    assert.ok(
      !forked.valid && ['log_inconsistent', 'log_proof_invalid'].includes(forked.error.code),
      JSON.stringify(forked),
    );
    assert.is(kept, good, 'the kept checkpoint stays the last good one');
    await new Promise<void>((r) => server.close(() => r()));
    await fork.close();
    await forkDb.close();
  } finally {
    await gw.close();
    await merchant.close();
    await db.drop();
  }
});

test.run();
