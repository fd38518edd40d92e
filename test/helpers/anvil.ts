/**
 * Foundry's anvil for tests: the node (gateway/dev/anvil.ts, shared with `ctl start --chain`) and
 * deploying the committed contract artifacts on it.
 */
import { ANVIL_ACCOUNTS, type Anvil, type AnvilAccount } from '../../gateway/dev/anvil.js';

export * from '../../gateway/dev/anvil.js';

/**
 * Deploys the committed artifact `contracts/<path>.json` (scripts/compile-contracts.mjs) from
 * `from` (default anvil's first account); resolves to its address once mined.
 * @example const anchor = await deployContract(anvil, 'CtlAnchor', [anvil.accounts[1].address])
 */
export async function deployContract(
  anvil: Anvil,
  path: string,
  args: unknown[] = [],
  from: AnvilAccount = ANVIL_ACCOUNTS[0]!,
): Promise<`0x${string}`> {
  const { contractArtifact } = await import('../../service-kit/chain/contracts.js');
  const { createWalletClient, createPublicClient, http, defineChain } = await import('viem');
  const { privateKeyToAccount } = await import('viem/accounts');
  const chain = defineChain({
    id: anvil.chainId,
    name: 'anvil',
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [anvil.url] } },
  });
  const { abi, bytecode } = contractArtifact(path);
  const wallet = createWalletClient({
    chain,
    transport: http(anvil.url),
    account: privateKeyToAccount(from.privateKey),
  });
  const hash = await wallet.deployContract({ abi, bytecode, args });
  // A node without automine (noMining) needs a block for the deployment.
  const pub = createPublicClient({ chain, transport: http(anvil.url) });
  let receipt;
  for (const deadline = Date.now() + 20_000; !receipt; await new Promise((r) => setTimeout(r, 50))) {
    receipt = await pub.getTransactionReceipt({ hash }).catch(() => undefined);
    if (!receipt && Date.now() > deadline) throw new Error(`${path}: not mined (mine a block?)`);
  }
  if (receipt.status !== 'success' || !receipt.contractAddress) throw new Error(`deploying ${path} failed`);
  return receipt.contractAddress;
}
