/**
 * An agent pays a merchant that speaks only the Machine Payments Protocol (the stock `mppx`
 * server with its `evm` charge, written as the mppx README says) through the gateway, holding only
 * a session token: the gateway answers the merchant's `Payment` challenge with an EIP-3009
 * authorization signed by its own EVM account, inside the session's budget, and hands the agent
 * the answer, the merchant's `Payment-Receipt` and the gateway's signed receipt. Past the budget
 * it is refused before anything is signed (gateway/README.md "MPP merchants").
 *
 * The chain is gateway/dev's in-memory EIP-3009 ledger behind the stock x402 facilitator, through
 * which mppx settles: nothing real is paid, and nothing of mppx is mocked.
 *
 *   npm run compile && node build/examples/mpp-merchant/main.js
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Receipt } from 'mppx';
import { createGatewayClient, CtlError, GatewayError, verifyReceipt } from '../../src/index.js';
import { openDatabase, listen, silentLogger } from '../../service-kit/index.js';
import { openGateway } from '../../gateway/server.js';
import { createEvmLedger, BASE_SEPOLIA_USDC } from '../../gateway/dev/evm-ledger.js';
import { startFacilitator } from '../../gateway/dev/x402-merchants.js';
import { startMppMerchant } from '../../gateway/dev/mpp-merchants.js';
import { expect } from '../shared/local-authority.js';

const PAY_TO = '0x5eA1e5000000000000000000000000000000dEa1';
/** USDC in atomic units (6 decimals): the merchant's search costs 0.01 USDC = 10000. */
const usdc = (atomic: bigint | string) => `${Number(atomic) / 1e6} USDC`;

// The merchant side: a stock mppx/express search API at 0.01 USDC, settling through the facilitator.
const ledger = createEvmLedger();
const facilitator = await startFacilitator(ledger);
const merchant = await startMppMerchant({ facilitatorUrl: facilitator.url, payTo: PAY_TO });
console.log(`merchant: ${merchant.url}/data, 0.01 USDC a search over MPP (WWW-Authenticate: Payment …)`);

// The gateway: sessions in USDC pay with Base Sepolia USDC (CTL_X402_ASSETS), the merchant's host allowed.
const dir = mkdtempSync(join(tmpdir(), 'ctl-mpp-'));
const adminKey = 'example-admin-key-0123456789';
const gateway = await openGateway({
  db: await openDatabase(`sqlite:${join(dir, 'gateway.db')}`),
  adminKey,
  logger: silentLogger(),
  targets: { allowPrivate: false, allowHosts: [new URL(merchant.url).host] },
  x402: {
    assets: new Map([['USDC', [{ network: 'eip155:84532', asset: BASE_SEPOLIA_USDC.address.toLowerCase() }]]]),
  },
});
const server = await listen(gateway.app, { port: 0 });
ledger.mint(gateway.evmAddress, 1_000_000n);
const funds = usdc(ledger.balanceOf(gateway.evmAddress));
console.log(`gateway: ${server.url}, paying from ${gateway.evmAddress} (${funds})`);
try {
  // The budget owner: 0.025 USDC for searches, an hour.
  const { apiKey } = (await (
    await fetch(`${server.url}/admin/owners`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
      body: '{"label":"research team"}',
    })
  ).json()) as { apiKey: string };
  const owner = createGatewayClient({ baseUrl: server.url, ownerKey: apiKey });
  const { sessionId, sessionToken } = await owner.createSession({
    budget: { amount: '25000', currency: 'USDC' },
    purposes: ['api:search'],
    expiresAt: new Date(Date.now() + 3600_000).toISOString().replace(/\.\d+Z$/, 'Z'),
    label: 'search agent',
  });
  console.log(`owner: session ${sessionId}, ${usdc(25000n)}`);

  // The agent: its token only; it never sees the 402, the challenge or a key.
  const agent = createGatewayClient({ baseUrl: server.url }).session(sessionToken, { sessionId });
  let paid = 0;
  let refusal = '';
  for (const q of ['tides', 'winds', 'swell']) {
    try {
      const res = await agent.fetch(`${merchant.url}/data?q=${q}`, { purpose: 'api:search' });
      const mpp = Receipt.deserialize(res.headers.get('payment-receipt')!);
      console.log(
        `agent: ${q} → HTTP ${res.status} ${await res.text()}; Payment-Receipt ${mpp.method} ${mpp.status} ` +
          `${mpp.reference.slice(0, 10)}…; CTL receipt ${res.headers.get('x-ctl-receipt-id')}`,
      );
      paid++;
    } catch (e) {
      if (!(e instanceof GatewayError || e instanceof CtlError)) throw e;
      refusal = e.code;
      console.log(`agent: ${q} not paid: ${e.code} (refused before anything was signed)`);
    }
  }

  // What moved, counted from the ledger and the gateway's own books; every receipt verifies.
  const view = await owner.getSession(sessionId);
  const { receipts } = await owner.receipts(sessionId);
  const jwks = await (await fetch(`${server.url}/.well-known/ctl-keys.json`)).json();
  const verified = await Promise.all(receipts.map((r) => verifyReceipt(r, { jwks })));
  console.log(
    `owner: spent ${usdc(view.spentMinor)} of ${usdc(view.budget.amount)}, ${receipts.length} receipts ` +
      `(${receipts.map((r) => r.rail).join(', ')}), ${verified.filter((v) => v.valid).length} verify`,
  );
  console.log(`ledger: merchant received ${usdc(ledger.balanceOf(PAY_TO))} in ${ledger.transfers.length} transfers`);
  expect(paid === 2 && refusal === 'budget_exceeded', 'two searches paid, the third past the budget refused');
  expect(view.spentMinor === '20000' && ledger.balanceOf(PAY_TO) === 20000n, 'the books and the ledger agree');
  expect(receipts.length === 2 && verified.every((v) => v.valid), 'a verifiable receipt per payment');
  expect(
    receipts.every((r) => String(r.rail).startsWith('mpp:')),
    'paid over MPP, not the x402 terms beside it',
  );
  const credentials = merchant.seen.filter((s) => s.headers.authorization?.startsWith('Payment '));
  expect(credentials.length === 2, 'the merchant received a credential for the two paid searches only');
  console.log('OK mpp-merchant');
} finally {
  await server.close();
  await gateway.close();
  await merchant.close();
  await facilitator.close();
  rmSync(dir, { recursive: true, force: true });
}
