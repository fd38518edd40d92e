/**
 * What a chain says about an x402 `upto` permit the gateway signed (PROTOCOL.md §15): whether
 * Permit2 consumed its unordered nonce and, if so, how much the upto proxy settled. Permit2 logs
 * no nonce and the proxy's `Settled()` event has no arguments, so the amount is found by following
 * the proxy's Settled events to their transactions and decoding their `settle` calldata (owner,
 * nonce, amount): the x402 upto proxy as the stock facilitator calls it.
 */
import { decodeFunctionData, getAddress, parseAbi } from 'viem';
import { PERMIT2_ADDRESS, x402UptoPermit2ProxyABI, x402UptoPermit2ProxyAddress } from '@x402/evm';
import type { X402ChainReader } from './rail.js';

export { PERMIT2_ADDRESS, x402UptoPermit2ProxyAddress as UPTO_PROXY_ADDRESS };

const NONCE_BITMAP_ABI = parseAbi(['function nonceBitmap(address owner, uint256 wordPos) view returns (uint256)']);
const ALLOWANCE_ABI = parseAbi(['function allowance(address owner, address spender) view returns (uint256)']);

/** Permit2's unordered nonce: bit `nonce & 255` of `nonceBitmap(owner, nonce >> 8)`. */
export async function permit2NonceUsed(reader: X402ChainReader, owner: string, nonce: bigint): Promise<boolean> {
  const word = await reader.readContract({
    address: PERMIT2_ADDRESS,
    abi: NONCE_BITMAP_ABI,
    functionName: 'nonceBitmap',
    args: [owner, nonce >> 8n],
  });
  if (typeof word !== 'bigint') throw new Error(`x402 upto: nonceBitmap answered ${String(word)}`);
  return ((word >> (nonce & 0xffn)) & 1n) === 1n;
}

/** The payer's ERC-20 allowance to Permit2: the one on-chain step `upto` needs before any permit works. */
export async function permit2Allowance(reader: X402ChainReader, token: string, owner: string): Promise<bigint> {
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
 * The amount and transaction of the proxy settle that consumed `owner`'s `nonce`; undefined when
 * none is found (the reader cannot list events, or Permit2 consumed it otherwise).
 */
export async function uptoSettlement(
  reader: X402ChainReader,
  owner: string,
  nonce: bigint,
): Promise<{ amount: bigint; tx: string } | undefined> {
  if (!reader.getContractEvents || !reader.getTransaction) return undefined;
  const events = await reader.getContractEvents({
    address: x402UptoPermit2ProxyAddress,
    abi: x402UptoPermit2ProxyABI,
    eventName: 'Settled',
  });
  const who = getAddress(owner);
  for (const e of events) {
    if (!e.transactionHash) continue;
    const t = await reader.getTransaction({ hash: e.transactionHash });
    let call;
    try {
      call = decodeFunctionData({ abi: x402UptoPermit2ProxyABI, data: t.input });
    } catch {
      continue; // another function of the proxy, or not the proxy's calldata
    }
    // settle(permit, amount, owner, …) and settleWithPermit(permit2612, permit, amount, owner, …)
    const args = (call.functionName === 'settleWithPermit' ? call.args.slice(1) : call.args) as readonly unknown[];
    if (call.functionName !== 'settle' && call.functionName !== 'settleWithPermit') continue;
    const [permit, amount, from] = args as [{ nonce: bigint }, bigint, string];
    if (getAddress(from) === who && permit.nonce === nonce) return { amount, tx: e.transactionHash };
  }
  return undefined;
}
