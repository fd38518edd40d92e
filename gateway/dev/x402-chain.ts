/**
 * x402 on a real EVM node (a local one: anvil): the contracts the stock x402 packages call, at the
 * addresses they call them at, and the stock facilitator's signer on that node.
 *
 * - USDC: contracts/x402/UsdcEip3009.sol (USDC's EIP-3009 interface, EIP-712 domain "USDC"/"2"),
 *   deployed, then its code placed at `usdcAddress` (default: Base Sepolia USDC's, the stock
 *   server's default asset of eip155:84532, so "$0.01" prices resolve to it on a node run with
 *   chain id 84532). Its domain reads the address and chain id at call time.
 * - Permit2: its canonical runtime code (contracts/vendor/Permit2.json, as Uniswap ships it) at
 *   its canonical address; its EIP-712 domain is rebuilt for this chain id and that address.
 * - x402's `upto` proxy: contracts/x402/x402UptoPermit2Proxy.sol at `x402UptoPermit2ProxyAddress`.
 * - Multicall3 (the stock facilitator batches its reads through it): viem's copy of its creation
 *   code (contracts/vendor/Multicall3.json), deployed, then placed at its canonical address.
 *
 * Placing code needs `anvil_setCode`: this is for local nodes only, never a public chain.
 */
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  getAddress,
  http,
  parseAbi,
  publicActions,
  type Hex,
  type PublicClient,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import {
  toFacilitatorEvmSigner,
  PERMIT2_ADDRESS,
  x402UptoPermit2ProxyAddress,
  type FacilitatorEvmSigner,
} from '@x402/evm';
import { contractArtifact } from '../../service-kit/chain/contracts.js';
import { BASE_SEPOLIA_USDC } from './evm-ledger.js';

export const MULTICALL3_ADDRESS = '0xcA11bde05977b3631167028862bE2a173976CA11';

export const USDC_ABI = parseAbi([
  'function balanceOf(address account) view returns (uint256)',
  'function mint(address to, uint256 value)',
  'function approve(address spender, uint256 value) returns (bool)',
  'function allowance(address owner, address spender) view returns (uint256)',
  'function authorizationState(address authorizer, bytes32 nonce) view returns (bool)',
  'function DOMAIN_SEPARATOR() view returns (bytes32)',
  'event Transfer(address indexed from, address indexed to, uint256 value)',
  'event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)',
]);

export interface X402Chain {
  url: string;
  chainId: number;
  /** The CAIP-2 network, `eip155:<chain id>`. */
  network: string;
  /** The token's address (lower case, as CTL_X402_ASSETS takes it). */
  usdc: `0x${string}`;
  /** The stock facilitator's signer: an account of the node that pays the gas of every settle. */
  signer: FacilitatorEvmSigner;
  /** Shaped as the in-memory ledger for `startFacilitator`. */
  token: { chainId: number; address: `0x${string}` };
  client: PublicClient;
  mint(to: string, amount: bigint): Promise<void>;
  balanceOf(who: string): Promise<bigint>;
  /** `owner` approves Permit2 for `amount` (the one on-chain step of `upto`), sent as `owner` (impersonated). */
  approvePermit2(owner: string, amount: bigint): Promise<void>;
  /** One JSON-RPC call to the node. */
  rpc<T = unknown>(method: string, params?: unknown[]): Promise<T>;
}

export interface X402ChainOptions {
  /** Deploys and mints (default anvil's first account). */
  deployerKey: Hex;
  /** The facilitator's account (default anvil's second). */
  facilitatorKey: Hex;
  /** Where the token's code is placed (default Base Sepolia USDC's address). */
  usdcAddress?: `0x${string}`;
}

/** anvil's first two default accounts (public test keys). */
const ANVIL_KEY_0: Hex = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';
const ANVIL_KEY_1: Hex = '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d';

/**
 * Puts USDC, Permit2, the upto proxy and Multicall3 on the node at `url` and returns handles.
 * Idempotent for Permit2, the proxy and Multicall3 (placed again); the token is placed anew (its
 * balances cleared) only where no code is yet.
 * @example const chain = await deployX402Chain(anvil.url); await chain.mint(gatewayAddress, 1_000_000n)
 */
export async function deployX402Chain(url: string, o: Partial<X402ChainOptions> = {}): Promise<X402Chain> {
  const rpc = async <T>(method: string, params: unknown[] = []): Promise<T> => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
      signal: AbortSignal.timeout(10_000),
    });
    const body = (await res.json()) as { result?: T; error?: { message: string } };
    if (body.error) throw new Error(`${method}: ${body.error.message}`);
    return body.result as T;
  };
  const chainId = Number(await rpc<string>('eth_chainId'));
  const chain = defineChain({
    id: chainId,
    name: `local ${chainId}`,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [url] } },
  });
  // A local node mines at once: poll receipts often, not viem's default 4 s.
  const transport = http(url, { timeout: 10_000 });
  const client = createPublicClient({ chain, transport, pollingInterval: 50 }) as PublicClient;
  const deployer = createWalletClient({
    chain,
    transport,
    account: privateKeyToAccount(o.deployerKey ?? ANVIL_KEY_0),
    pollingInterval: 50,
  });
  const mined = async (hash: Hex) => {
    const r = await client.waitForTransactionReceipt({ hash, timeout: 20_000 });
    if (r.status !== 'success') throw new Error(`transaction ${hash} reverted`);
    return r;
  };
  /** Deploys `bytecode`, then places the code it left at `at`. */
  const place = async (at: string, bytecode: Hex) => {
    const r = await mined(await deployer.sendTransaction({ data: bytecode }));
    const code = await client.getCode({ address: r.contractAddress! });
    await rpc('anvil_setCode', [at, code]);
  };

  await rpc('anvil_setCode', [PERMIT2_ADDRESS, vendored('Permit2').deployedBytecode]);
  await rpc('anvil_setCode', [
    x402UptoPermit2ProxyAddress,
    contractArtifact('x402/x402UptoPermit2Proxy').deployedBytecode,
  ]);
  if ((await client.getCode({ address: MULTICALL3_ADDRESS })) === undefined)
    await place(MULTICALL3_ADDRESS, vendored('Multicall3').bytecode!);
  const usdc = getAddress(o.usdcAddress ?? BASE_SEPOLIA_USDC.address);
  if ((await client.getCode({ address: usdc })) === undefined) {
    const { abi, bytecode } = contractArtifact('x402/UsdcEip3009');
    const hash = await deployer.deployContract({ abi, bytecode, args: [deployer.account.address] });
    const r = await mined(hash);
    // The minter is immutable (in the code), so the placed copy mints for the deployer too.
    await rpc('anvil_setCode', [usdc, await client.getCode({ address: r.contractAddress! })]);
  }

  const account = privateKeyToAccount(o.facilitatorKey ?? ANVIL_KEY_1);
  const facilitator = createWalletClient({ chain, transport, account, pollingInterval: 50 }).extend(publicActions);
  // toFacilitatorEvmSigner takes the account's address from `address`, which a wallet client lacks.
  const signer = toFacilitatorEvmSigner(Object.assign(facilitator, { address: account.address }) as any);
  return {
    url,
    chainId,
    network: `eip155:${chainId}`,
    usdc: usdc.toLowerCase() as `0x${string}`,
    signer,
    token: { chainId, address: usdc },
    client,
    rpc,
    async mint(to, amount) {
      await mined(
        await deployer.writeContract({
          address: usdc,
          abi: USDC_ABI,
          functionName: 'mint',
          args: [getAddress(to), amount],
        }),
      );
    },
    async balanceOf(who) {
      return client.readContract({ address: usdc, abi: USDC_ABI, functionName: 'balanceOf', args: [getAddress(who)] });
    },
    async approvePermit2(owner, amount) {
      const from = getAddress(owner);
      await rpc('anvil_setBalance', [from, '0x56bc75e2d63100000']); // 100 ETH for gas
      await rpc('anvil_impersonateAccount', [from]);
      try {
        const as = createWalletClient({ chain, transport, account: from, pollingInterval: 50 });
        await mined(
          await as.writeContract({
            address: usdc,
            abi: USDC_ABI,
            functionName: 'approve',
            args: [PERMIT2_ADDRESS, amount],
          }),
        );
      } finally {
        await rpc('anvil_stopImpersonatingAccount', [from]);
      }
    },
  };
}

/** A vendored artifact of contracts/vendor/ (bytecode shipped by its authors' packages, with its origin). */
function vendored(name: 'Permit2' | 'Multicall3'): { bytecode?: Hex; deployedBytecode?: Hex } {
  return contractArtifact(`vendor/${name}`) as unknown as { bytecode?: Hex; deployedBytecode?: Hex };
}
