/**
 * What a chain says about an x402 `upto` permit the gateway signed (PROTOCOL.md §15): whether
 * Permit2 consumed its unordered nonce and, if so, how much the upto proxy settled. Permit2 logs
 * no nonce and the proxy's `Settled()` event has no arguments, so the amount is found by following
 * the proxy's Settled events to their transactions and decoding their `settle` calldata (owner,
 * nonce, amount): the x402 upto proxy as the stock facilitator calls it.
 */
import { decodeEventLog, decodeFunctionData, getAddress, parseAbi } from 'viem';
import { PERMIT2_ADDRESS, x402UptoPermit2ProxyABI, x402UptoPermit2ProxyAddress } from '@x402/evm';
import { confirmedBlock, type EvmChainReader } from './chain.js';

export { PERMIT2_ADDRESS, x402UptoPermit2ProxyAddress as UPTO_PROXY_ADDRESS };

const NONCE_BITMAP_ABI = parseAbi(['function nonceBitmap(address owner, uint256 wordPos) view returns (uint256)']);
const ALLOWANCE_ABI = parseAbi(['function allowance(address owner, address spender) view returns (uint256)']);
const TRANSFER_ABI = parseAbi(['event Transfer(address indexed from, address indexed to, uint256 value)']);

/** Permit2's unordered nonce: bit `nonce & 255` of `nonceBitmap(owner, nonce >> 8)`, at block `at` (else the head). */
export async function permit2NonceUsed(
  reader: EvmChainReader,
  owner: string,
  nonce: bigint,
  at?: bigint,
): Promise<boolean> {
  const word = await reader.readContract({
    address: PERMIT2_ADDRESS,
    abi: NONCE_BITMAP_ABI,
    functionName: 'nonceBitmap',
    args: [owner, nonce >> 8n],
    ...(at !== undefined ? { blockNumber: at } : {}),
  });
  if (typeof word !== 'bigint') throw new Error(`x402 upto: nonceBitmap answered ${String(word)}`);
  return ((word >> (nonce & 0xffn)) & 1n) === 1n;
}

/** The payer's ERC-20 allowance to Permit2: the one on-chain step `upto` needs before any permit works. */
export async function permit2Allowance(reader: EvmChainReader, token: string, owner: string): Promise<bigint> {
  const a = await reader.readContract({
    address: token as `0x${string}`,
    abi: ALLOWANCE_ABI,
    functionName: 'allowance',
    args: [owner, PERMIT2_ADDRESS],
  });
  if (typeof a !== 'bigint') throw new Error(`x402 upto: allowance answered ${String(a)}`);
  return a;
}

/**
 * The amount and transaction of the proxy settle that consumed `owner`'s `nonce`, among the
 * proxy's Settled events from `fromBlock` (the head when the permit was signed: no settle of it
 * can be older) to `toBlock`; undefined when none is found (a reader that cannot list events).
 */
export async function uptoSettlement(
  reader: EvmChainReader,
  owner: string,
  nonce: bigint,
  range: { fromBlock?: bigint; toBlock?: bigint } = {},
): Promise<{ amount: bigint; tx: string } | undefined> {
  if (!reader.getContractEvents || !reader.getTransaction) return undefined;
  const events = await reader.getContractEvents({
    address: x402UptoPermit2ProxyAddress,
    abi: x402UptoPermit2ProxyABI,
    eventName: 'Settled',
    // Always a range: a node asked with no fromBlock answers for the latest block alone.
    fromBlock: range.fromBlock ?? 0n,
    ...(range.toBlock !== undefined ? { toBlock: range.toBlock } : {}),
  });
  for (const e of events) {
    if (!e.transactionHash) continue;
    const t = await reader.getTransaction({ hash: e.transactionHash });
    const amount = settleCallAmount(t.input, owner, nonce);
    if (amount !== undefined) return { amount, tx: e.transactionHash };
  }
  return undefined;
}

/** The amount of a proxy `settle` call for `owner`'s `nonce` in `input`; undefined for any other call. */
function settleCallAmount(input: `0x${string}`, owner: string, nonce: bigint): bigint | undefined {
  let call;
  try {
    call = decodeFunctionData({ abi: x402UptoPermit2ProxyABI, data: input });
  } catch {
    return undefined; // another function of the proxy, or not the proxy's calldata
  }
  // settle(permit, amount, owner, …) and settleWithPermit(permit2612, permit, amount, owner, …)
  if (call.functionName !== 'settle' && call.functionName !== 'settleWithPermit') return undefined;
  const args = (call.functionName === 'settleWithPermit' ? call.args.slice(1) : call.args) as readonly unknown[];
  const [permit, amount, from] = args as [{ nonce: bigint }, bigint, string];
  return getAddress(from) === getAddress(owner) && permit.nonce === nonce ? amount : undefined;
}

/**
 * What moved under `owner`'s permit `nonce`, as the chain tells it `confirmations` deep
 * (chain.ts confirmedBlock: a settle at the head may yet be reorganised away, and the permit cashed
 * again, for more): `{ used: false }` while Permit2 has not consumed the nonce in a confirmed block,
 * `atHead` when it has at the head (a settle not yet deep enough: wait, whatever a deadline says);
 * else the amount and transaction of the settle that consumed it,
 * found from the transaction the merchant named (mined successfully in a confirmed block, a call
 * of the proxy's `settle` for this owner and nonce; the larger of its amount and the token
 * transfers out of `owner` in it) or else from the proxy's `Settled` events since `fromBlock`;
 * `{ used: true }` alone when neither is found (the caller counts the whole hold). A reader that
 * fails on the nonce throws: nothing is known.
 */
export async function uptoMoved(
  reader: EvmChainReader,
  p: { owner: string; nonce: bigint; token: string; namedTx?: string; fromBlock?: bigint },
): Promise<{ used: false; atHead: boolean } | { used: true; amount?: bigint; tx?: string }> {
  const at = await confirmedBlock(reader);
  if (!(await permit2NonceUsed(reader, p.owner, p.nonce, at)))
    return { used: false, atHead: at !== undefined && (await permit2NonceUsed(reader, p.owner, p.nonce)) };
  const named = p.namedTx ? await settleInTransaction(reader, p, p.namedTx, at).catch(() => undefined) : undefined;
  // A scan the node refuses (a range too long) finds nothing: the whole hold, never less.
  const found =
    named ??
    (await uptoSettlement(reader, p.owner, p.nonce, { fromBlock: p.fromBlock, toBlock: at }).catch(() => undefined));
  return found ? { used: true, ...found } : { used: true };
}

/** The settle of `p`'s permit in transaction `hash`, when the chain shows it there (uptoMoved). */
async function settleInTransaction(
  reader: EvmChainReader,
  p: { owner: string; nonce: bigint; token: string },
  hash: string,
  at: bigint | undefined,
): Promise<{ amount: bigint; tx: string } | undefined> {
  if (!reader.getTransaction || !reader.getTransactionReceipt || !/^0x[0-9a-fA-F]{64}$/.test(hash)) return undefined;
  const receipt = await reader.getTransactionReceipt({ hash: hash as `0x${string}` });
  if (receipt.status !== 'success') return undefined;
  // Mined in a confirmed block, or not (yet) the settle that counts.
  if (at !== undefined && !(receipt.blockNumber !== undefined && receipt.blockNumber <= at)) return undefined;
  const t = await reader.getTransaction({ hash: hash as `0x${string}` });
  if (!t.to || getAddress(t.to) !== getAddress(x402UptoPermit2ProxyAddress)) return undefined;
  const asked = settleCallAmount(t.input, p.owner, p.nonce);
  if (asked === undefined) return undefined;
  // What left the owner's account in that transaction: the token's own Transfer logs.
  let out = 0n;
  for (const l of receipt.logs) {
    if (getAddress(l.address) !== getAddress(p.token)) continue;
    try {
      const e = decodeEventLog({ abi: TRANSFER_ABI, data: l.data, topics: l.topics as any });
      if (getAddress(e.args.from) === getAddress(p.owner)) out += e.args.value;
    } catch {
      // another event of the token
    }
  }
  return { amount: out > asked ? out : asked, tx: hash };
}
