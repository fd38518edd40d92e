/**
 * The merchant answers the paid retry only after reconcile has settled the payment (the answer
 * was slower than the authorization's validity: a loaded machine, a database failing over). The
 * client must be handed the receipt the gateway stored, never the one it signed for its own
 * commit, which lost the race and was never stored (found by test/resilience/failover.slow.test.ts).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import http from 'node:http';
import { sqliteDb, startTestGateway, createSession, proxy, call } from '../helpers.js';
import { createEvmLedger } from '../../../gateway/dev/evm-ledger.js';
import { USDC_ASSETS } from './stand.js';
import { startFacilitator, startStockMerchant } from '../../../gateway/dev/x402-merchants.js';

const PAYEE = '0x4444444444444444444444444444444444444444';

/** In front of `target`: a paid retry's answer (settled at the merchant) is held until `release()`. */
async function holdingRelay(target: string) {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let held!: () => void;
  const holding = new Promise<void>((r) => (held = r));
  const server = http.createServer(async (req, res) => {
    const body = await new Promise<Buffer>((r) => {
      const parts: Buffer[] = [];
      req.on('data', (d: Buffer) => parts.push(d)).on('end', () => r(Buffer.concat(parts)));
    });
    const headers = Object.fromEntries(
      Object.entries(req.headers).filter(([k]) => k !== 'host' && k !== 'connection') as [string, string][],
    );
    const up = await fetch(target + req.url, {
      method: req.method,
      headers,
      ...(body.length ? { body: new Uint8Array(body) } : {}),
    });
    const text = Buffer.from(await up.arrayBuffer());
    if (req.headers['payment-signature'] || req.headers['x-payment']) {
      held();
      await released;
    }
    const out: Record<string, string> = {};
    up.headers.forEach((v, k) => {
      if (k !== 'content-encoding' && k !== 'transfer-encoding' && k !== 'connection') out[k] = v;
    });
    res.writeHead(up.status, out).end(text);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    holding,
    release,
    close: () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))),
  };
}

test('a paid retry answered after reconcile settled the payment: the client gets the stored receipt', async () => {
  const ledger = createEvmLedger();
  const facilitator = await startFacilitator(ledger);
  const merchant = await startStockMerchant({ facilitatorUrl: facilitator.url, payTo: PAYEE });
  const relay = await holdingRelay(merchant.url);
  const db = sqliteDb();
  let skewMs = 0;
  const gw = await startTestGateway(db, {
    now: () => Date.now() + skewMs,
    x402: { assets: USDC_ASSETS, chain: (network) => (network === 'eip155:84532' ? ledger.signer : undefined) },
  });
  ledger.mint(gw.gw.evmAddress, 1_000_000n);
  try {
    const s = await createSession(gw, { budget: { amount: '100000', currency: 'USDC' }, purposes: ['api:search'] });
    const answer = proxy(gw, s.sessionToken, `${relay.url}/data`, { purpose: 'api:search', method: 'GET' });
    // The merchant has settled on the chain; its answer is held. Past the authorization's
    // expiry, reconcile finds the nonce used and commits the payment with a receipt of its own.
    await relay.holding;
    skewMs = 2 * 3600_000;
    assert.equal(await gw.gw.reconcile(0), { committed: 1, released: 0 });
    skewMs = 0;
    relay.release();
    const res = await answer;
    assert.is(res.status, 200, res.text);
    const { receipts } = (await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey })).body;
    assert.is(receipts.length, 1, 'one payment, one receipt');
    assert.is(res.headers.get('x-ctl-receipt-id'), receipts[0].receiptId, 'the receipt handed out is the stored one');
    const v = (await call(gw.url, 'GET', `/sessions/${s.sessionId}`, { key: gw.ownerKey })).body;
    assert.equal([v.spentMinor, v.reservedMinor], ['10000', '0']);
  } finally {
    await gw.close();
    await relay.close();
    await merchant.close();
    await facilitator.close();
    await db.drop();
  }
});

test.run();
