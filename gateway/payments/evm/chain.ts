/**
 * `CTL_X402_RPC_URL`: the chains the gateway can read, so reconcile can tell an expired x402
 * authorization that was cashed (committed) from one that was not (released). JSON, CAIP-2
 * network → JSON-RPC URL, e.g. `{"eip155:84532":"https://sepolia.base.org"}`. A network with no
 * URL has no reader: its expired sent authorizations are counted spent (rail.ts settle).
 */
import { CAIP2_EVM } from './assets.js';

/**
 * Clock skew allowed between the gateway and the chain before an authorization past its
 * `validBefore` counts as dead (a block at `validBefore - 1` may carry a timestamp ahead of ours).
 * A chain on the gateway's own clock (a local ledger) may be given a smaller one.
 */
export const DEFAULT_EXPIRY_MARGIN_MS = 60_000;

/** Read access to the chains the gateway pays on (optional): a viem PublicClient fits. */
export interface EvmChainReader {
  readContract(args: {
    address: `0x${string}`;
    abi: readonly unknown[];
    functionName: string;
    args?: readonly unknown[];
    /** Read the state as of this block (confirmedBlock), not the head. */
    blockNumber?: bigint;
  }): Promise<unknown>;
  /** For `upto` (permit2.ts): the upto proxy's Settled events, then their transactions' calldata. */
  getContractEvents?(args: {
    address: `0x${string}`;
    abi: readonly unknown[];
    eventName: string;
    fromBlock?: bigint;
    toBlock?: bigint;
  }): Promise<readonly { transactionHash: `0x${string}` | null }[]>;
  getTransaction?(args: { hash: `0x${string}` }): Promise<{ input: `0x${string}`; to?: `0x${string}` | null }>;
  /** A mined transaction's status, block and logs: what it moved (permit2.ts uptoMoved, settled.ts). */
  getTransactionReceipt?(args: { hash: `0x${string}` }): Promise<{
    status: 'success' | 'reverted';
    blockNumber?: bigint;
    logs: readonly { address: `0x${string}`; topics: readonly `0x${string}`[]; data: `0x${string}` }[];
  }>;
  /** The head's number: with it, reads that commit money are made `confirmations` deep (confirmedBlock). */
  getBlockNumber?(args?: { cacheTime?: number }): Promise<bigint>;
  /** How many blocks, the head included, a read must be under to count as final (default DEFAULT_CONFIRMATIONS). */
  confirmations?: number;
}

/**
 * What moved is read this deep by default: the block that holds a settle and one on top of it. A
 * read at the head alone may be reorganised away, and the merchant, who keeps the signed permit,
 * may cash it again (for more) on the chain that stays. Chains that reorg deeper need more
 * (`CTL_X402_CONFIRMATIONS`).
 */
export const DEFAULT_CONFIRMATIONS = 2;

/**
 * The newest block a read that commits money may look at: the head less `confirmations - 1`;
 * undefined (the head) for a reader that numbers no blocks (a local ledger, which never reorgs).
 */
export async function confirmedBlock(reader: EvmChainReader): Promise<bigint | undefined> {
  if (!reader.getBlockNumber) return undefined;
  const head = await reader.getBlockNumber({ cacheTime: 0 }); // viem keeps a head for 4 s unless told
  const depth = BigInt((reader.confirmations ?? DEFAULT_CONFIRMATIONS) - 1);
  return head > depth ? head - depth : 0n;
}

/** `CTL_X402_CONFIRMATIONS`: 1 (the head) to 1000; unset is DEFAULT_CONFIRMATIONS. */
export function parseConfirmations(text: string | undefined): number {
  if (text === undefined || text.trim() === '') return DEFAULT_CONFIRMATIONS;
  const n = Number(text.trim());
  if (!/^[0-9]+$/.test(text.trim()) || n < 1 || n > 1000)
    throw new Error('CTL_X402_CONFIRMATIONS: a whole number of blocks, 1 (the head) to 1000');
  return n;
}

export function parseRpcUrls(json: string | undefined): ReadonlyMap<string, string> {
  const map = new Map<string, string>();
  if (!json) return map;
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch {
    throw new Error('CTL_X402_RPC_URL: not JSON');
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new Error('CTL_X402_RPC_URL: must be an object of network → URL');
  for (const [network, url] of Object.entries(v)) {
    if (!CAIP2_EVM.test(network)) throw new Error(`CTL_X402_RPC_URL: '${network}' is not CAIP-2 'eip155:<chain id>'`);
    if (typeof url !== 'string' || !/^https?:\/\/\S+$/.test(url))
      throw new Error(`CTL_X402_RPC_URL.${network}: must be an http(s) URL`);
    map.set(network, url);
  }
  return map;
}

/** One viem PublicClient per configured network (made on first use); undefined for the others. */
export function chainReaders(
  urls: ReadonlyMap<string, string>,
  confirmations = DEFAULT_CONFIRMATIONS,
): ((network: string) => EvmChainReader | undefined) | undefined {
  if (urls.size === 0) return undefined;
  const clients = new Map<string, EvmChainReader>();
  return (network) => {
    const url = urls.get(network);
    if (!url) return undefined;
    let c = clients.get(network);
    if (!c) {
      c = { ...viemReader(url), confirmations };
      clients.set(network, c);
    }
    return c;
  };
}

/**
 * A viem PublicClient over `url`, created at its first read: viem is some 400 modules, and a
 * configuration that is only read (a refused start, `--help`) need not load them.
 */
function viemReader(url: string): Required<Omit<EvmChainReader, 'confirmations'>> {
  let client: Promise<Required<EvmChainReader>> | undefined;
  const viem = () =>
    (client ??= import('viem').then(
      ({ createPublicClient, http }) =>
        createPublicClient({ transport: http(url, { timeout: 10_000 }) }) as unknown as Required<EvmChainReader>,
    ));
  return {
    readContract: async (a) => (await viem()).readContract(a),
    getContractEvents: async (a) => (await viem()).getContractEvents(a),
    getTransaction: async (a) => (await viem()).getTransaction(a),
    getTransactionReceipt: async (a) => (await viem()).getTransactionReceipt(a),
    getBlockNumber: async (a) => (await viem()).getBlockNumber(a),
  };
}
