/**
 * The x402 test stand: an in-memory EIP-3009 ledger, the stock facilitator, a merchant built
 * from the official @x402/express packages, and a gateway on SQLite whose EVM address holds
 * USDC on that ledger.
 */
import { sqliteDb, startTestGateway, type TestDb, type TestGateway } from '../helpers.js';
import { createEvmLedger, BASE_SEPOLIA_USDC, type EvmLedger } from '../../../gateway/dev/evm-ledger.js';
import {
  startFacilitator,
  startStockMerchant,
  type Listening,
  type StockMerchant,
} from '../../../gateway/dev/x402-merchants.js';

export const USDC = BASE_SEPOLIA_USDC.address.toLowerCase();
/** CTL_X402_ASSETS as the gateway takes it: USDC on Base Sepolia. */
export const USDC_ASSETS = new Map([['USDC', [{ network: 'eip155:84532', asset: USDC }]]]);

export interface X402Stand {
  db: TestDb;
  gw: TestGateway;
  ledger: EvmLedger;
  facilitator: Listening;
  merchant: StockMerchant;
  close(): Promise<void>;
}

/** @example const stand = await startX402Stand({ payTo: PAYEE }); … await stand.close() */
export async function startX402Stand(o: { payTo: string; mint?: bigint }): Promise<X402Stand> {
  const ledger = createEvmLedger();
  const facilitator = await startFacilitator(ledger);
  const merchant = await startStockMerchant({ facilitatorUrl: facilitator.url, payTo: o.payTo });
  const db = sqliteDb();
  const gw = await startTestGateway(db, { x402: { assets: USDC_ASSETS } });
  ledger.mint(gw.gw.evmAddress, o.mint ?? 1_000_000n);
  return {
    db,
    gw,
    ledger,
    facilitator,
    merchant,
    async close() {
      await gw.close();
      await merchant.close();
      await facilitator.close();
      await db.drop();
    },
  };
}
