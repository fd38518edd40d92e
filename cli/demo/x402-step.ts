/**
 * The x402 part of `ctl demo`: a merchant built only with the stock @x402/express,
 * whose facilitator is the stock x402Facilitator on an in-memory EIP-3009 ledger (no chain, loopback
 * only). Those are development dependencies, loaded on demand: without them the step is skipped.
 */
export interface X402Demo {
  merchantUrl: string;
  merchantHost: string;
  payTo: string;
  usdc: string;
  fund(address: string, amount: bigint): void;
  balanceOf(address: string): bigint;
  close(): Promise<void>;
}

export async function startX402Demo(): Promise<X402Demo | undefined> {
  try {
    const { createEvmLedger, BASE_SEPOLIA_USDC } = await import('../../gateway/dev/evm-ledger.js');
    const { startFacilitator, startStockMerchant } = await import('../../gateway/dev/x402-merchants.js');
    const ledger = createEvmLedger();
    const payTo = '0x5eA1e5000000000000000000000000000000dEa1';
    const facilitator = await startFacilitator(ledger);
    const merchant = await startStockMerchant({ facilitatorUrl: facilitator.url, payTo });
    return {
      merchantUrl: merchant.url,
      merchantHost: new URL(merchant.url).host,
      payTo,
      usdc: BASE_SEPOLIA_USDC.address.toLowerCase(),
      fund: (a, n) => ledger.mint(a, n),
      balanceOf: (a) => ledger.balanceOf(a),
      async close() {
        await merchant.close();
        await facilitator.close();
      },
    };
  } catch {
    return undefined;
  }
}
