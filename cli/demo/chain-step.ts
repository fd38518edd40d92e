/**
 * `ctl start --chain`: a local EVM node beside the services, and x402 merchants that settle on it.
 * anvil (the devDependency @foundry-rs/anvil) runs as chain 84532 with USDC (EIP-3009), Permit2,
 * x402's `upto` proxy and Multicall3 placed where the stock x402 packages look for them
 * (gateway/dev/x402-chain.ts); the stock facilitator settles over JSON-RPC from an anvil account;
 * a stock @x402/express merchant charges $0.01 a search (`exact`) and a metered one up to $0.05
 * (`upto`). The gateway is given CTL_X402_ASSETS, CTL_X402_RPC_URL and CTL_X402_CONFIRMATIONS=1 for
 * that node (unless set), and its paying account is funded with USDC once it is up. Development
 * only, like the demo merchant.
 */
export interface ChainDemo {
  /** The node's JSON-RPC URL. */
  rpcUrl: string;
  network: string;
  usdc: string;
  /** The stock `exact` merchant: `GET /data` costs 10000 (0.01 USDC). */
  merchantUrl: string;
  /** The stock `upto` merchant: `GET /metered?units=N` settles N × 1000 of at most 50000. */
  uptoUrl: string;
  payTo: string;
  /** `host:port` of each merchant, the private targets the gateway must be let through to. */
  hostPorts: string[];
  /** The variables the gateway needs for the node (CTL_X402_ASSETS, CTL_X402_RPC_URL, CTL_X402_CONFIRMATIONS). */
  env: Record<string, string>;
  /** Mints USDC to `address` and approves Permit2 from it (for `upto`). */
  fund(address: string, amount: bigint): Promise<void>;
  balanceOf(address: string): Promise<bigint>;
  close(): Promise<void>;
}

export const CHAIN_DEMO_PAY_TO = '0x5eA1e5000000000000000000000000000000dEa1';

export async function startChainDemo(): Promise<ChainDemo> {
  const [{ anvilBinary, startAnvil }, { deployX402Chain }, { startFacilitator, startStockMerchant }, upto] =
    await Promise.all([
      import('../../gateway/dev/anvil.js'),
      import('../../gateway/dev/x402-chain.js'),
      import('../../gateway/dev/x402-merchants.js'),
      import('../../gateway/dev/x402-upto-merchant.js'),
    ]);
  if (!anvilBinary())
    throw new Error(
      `--chain needs anvil: the devDependency @foundry-rs/anvil has no binary for ` +
        `${process.platform}-${process.arch} here (npm install, with development dependencies)`,
    );
  const anvil = await startAnvil({ chainId: 84532 });
  const closers: (() => Promise<void>)[] = [() => anvil.stop()];
  const close = async () => {
    for (const c of closers.reverse()) await c().catch(() => {});
  };
  try {
    const chain = await deployX402Chain(anvil.url);
    const facilitator = await startFacilitator(chain);
    closers.push(() => facilitator.close());
    const merchant = await startStockMerchant({ facilitatorUrl: facilitator.url, payTo: CHAIN_DEMO_PAY_TO });
    closers.push(() => merchant.close());
    const metered = await upto.startUptoMerchant({ facilitatorUrl: facilitator.url, payTo: CHAIN_DEMO_PAY_TO });
    closers.push(() => metered.close());
    return {
      rpcUrl: anvil.url,
      network: chain.network,
      usdc: chain.usdc,
      merchantUrl: merchant.url,
      uptoUrl: metered.url,
      payTo: CHAIN_DEMO_PAY_TO,
      hostPorts: [new URL(merchant.url).host, new URL(metered.url).host],
      env: {
        CTL_X402_ASSETS: JSON.stringify({ USDC: [{ network: chain.network, asset: chain.usdc }] }),
        CTL_X402_RPC_URL: JSON.stringify({ [chain.network]: anvil.url }),
        // One local node that mines each transaction on its own and never reorganises: the head is final.
        CTL_X402_CONFIRMATIONS: '1',
      },
      async fund(address, amount) {
        await chain.mint(address, amount);
        await chain.approvePermit2(address, amount);
      },
      balanceOf: (a) => chain.balanceOf(a),
      close,
    };
  } catch (e) {
    await close();
    throw e;
  }
}
