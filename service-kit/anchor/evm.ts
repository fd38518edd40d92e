/**
 * The EVM ledger: anchors as `CtlAnchor.anchor(origin, size, root)` calls (an `Anchored` event
 * each) and revocation tokens as `CtlRevocationTokens.mint(id, expiresAt)` calls, signed by the
 * service's secp256k1 key (a key file or PKCS#11, chain/evm-signer.ts) through viem over the
 * node's JSON-RPC. The chain id is pinned: a node answering another chain is refused before
 * anything is signed, and the signature (EIP-155) binds the transaction to that chain.
 */
import type { Hex, PublicClient } from 'viem';
import { CTL_ANCHOR_ABI, CTL_REVOCATION_TOKENS_ABI } from '../chain/contracts.js';
import { evmAccount, type EvmSigner } from '../chain/evm-signer.js';
import { redactRpcUrl } from '../chain/json-rpc.js';
import { TxRejected, type ChainJob, type JobKind, type Ledger, type TxStatus } from './ledger.js';

export interface EvmLedgerOptions {
  rpcUrl: string;
  chainId: number;
  signer: EvmSigner;
  /** The CtlAnchor contract (anchors). */
  anchorContract?: Hex;
  /** The CtlRevocationTokens contract (revocation tokens; the authority). */
  revocationContract?: Hex;
  /** Depth at which a transaction counts (default 12). */
  confirmations?: number;
  fetch?: typeof fetch;
  /** Per JSON-RPC call (default 10 000 ms). */
  timeoutMs?: number;
  /** The ledger's name in rows, metrics and events (default `evm`). */
  name?: string;
}

/** Messages nodes (geth, anvil, reth, erigon) give for a transaction they already hold. */
const ALREADY_KNOWN = /already known|known transaction|already imported|transaction already exists/i;
/** …and for one they will never take as it is. */
const NEVER = /nonce too low|replacement transaction underpriced|nonce has already been used|already used/i;

/** @example const evm = await createEvmLedger({ rpcUrl, chainId: 1, signer, anchorContract }) */
export async function createEvmLedger(o: EvmLedgerOptions): Promise<Ledger> {
  const viem = await import('viem');
  const chain = viem.defineChain({
    id: o.chainId,
    name: `chain ${o.chainId}`,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [o.rpcUrl] } },
  });
  const transport = viem.http(o.rpcUrl, {
    timeout: o.timeoutMs ?? 10_000,
    retryCount: 0,
    ...(o.fetch ? { fetchFn: o.fetch } : {}),
  });
  const client = viem.createPublicClient({ chain, transport }) as PublicClient;
  const account = await evmAccount(o.signer);
  const where = redactRpcUrl(o.rpcUrl);
  const kinds: JobKind[] = [];
  if (o.anchorContract) kinds.push('anchor');
  if (o.revocationContract) kinds.push('revocation');
  let chainChecked = false;

  async function checkChain() {
    if (chainChecked) return;
    const id = await client.getChainId();
    if (id !== o.chainId)
      throw new Error(`${where} is chain ${id}, not the configured chain ${o.chainId}: nothing signed`);
    chainChecked = true;
  }

  /** The contract call of a job, and its calldata. */
  function call(job: ChainJob) {
    const c =
      job.kind === 'anchor'
        ? {
            address: o.anchorContract!,
            abi: CTL_ANCHOR_ABI,
            functionName: 'anchor' as const,
            args: [job.head.origin, BigInt(job.head.size), `0x${job.head.root}`] as const,
          }
        : {
            address: o.revocationContract!,
            abi: CTL_REVOCATION_TOKENS_ABI,
            functionName: 'mint' as const,
            args: [`0x${job.id}`, BigInt(job.expiresAt)] as const,
          };
    return { ...c, data: viem.encodeFunctionData(c as Parameters<typeof viem.encodeFunctionData>[0]) };
  }

  /** A viem error in one line, with the contract's own error when the call reverted (NotAnchorer(0x…)). */
  const short = (e: unknown) => {
    const err = e as InstanceType<typeof viem.BaseError>;
    const reverted =
      typeof err?.walk === 'function'
        ? (err.walk((x) => x instanceof viem.ContractFunctionRevertedError) as
            InstanceType<typeof viem.ContractFunctionRevertedError> | undefined)
        : undefined;
    const custom = reverted?.data ? `${reverted.data.errorName}(${(reverted.data.args ?? []).join(', ')})` : undefined;
    return [err?.shortMessage ?? err?.message, custom ?? err?.details].filter(Boolean).join(': ');
  };

  return {
    name: o.name ?? 'evm',
    confirmations: o.confirmations ?? 12,
    kinds,
    async prepare(job) {
      if (!kinds.includes(job.kind)) throw new Error(`the EVM ledger has no contract for ${job.kind} jobs`);
      await checkChain();
      const c = call(job);
      try {
        // The pool's count: transactions of this signer the node holds are counted (never two with one nonce).
        const nonce = await client.getTransactionCount({ address: account.address, blockTag: 'pending' });
        // Estimating runs the call: a signer that is not the contract's anchorer (or authority) fails
        // here, unsent, with the contract's error decoded (NotAnchorer, NotAuthority).
        const gas = await client.estimateContractGas({ ...c, account: account.address } as never);
        const fees = await client.estimateFeesPerGas();
        const raw = await account.signTransaction({
          type: 'eip1559',
          chainId: o.chainId,
          to: c.address,
          data: c.data,
          nonce,
          gas: (gas * 12n) / 10n,
          maxFeePerGas: fees.maxFeePerGas,
          maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
        });
        return { txid: viem.keccak256(raw), raw };
      } catch (e) {
        throw new Error(`preparing the ${job.kind} transaction at ${where}: ${short(e)}`);
      }
    },
    async broadcast(tx) {
      try {
        await client.request({ method: 'eth_sendRawTransaction', params: [tx.raw as Hex] });
      } catch (e) {
        const text = short(e);
        if (ALREADY_KNOWN.test(text)) return;
        if (NEVER.test(text)) {
          // Our own transaction mined meanwhile answers "nonce too low" too.
          const mined = await client.getTransactionReceipt({ hash: tx.txid as Hex }).catch(() => undefined);
          if (mined) return;
          throw new TxRejected(`${where} refused ${tx.txid}: ${text}`);
        }
        throw new Error(`broadcasting ${tx.txid} to ${where}: ${text}`);
      }
    },
    async status(tx): Promise<TxStatus> {
      const hash = tx.txid as Hex;
      const receipt = await client.getTransactionReceipt({ hash }).catch((e) => {
        if (e?.name === 'TransactionReceiptNotFoundError') return undefined;
        throw new Error(`reading the receipt of ${hash} at ${where}: ${short(e)}`);
      });
      if (receipt) {
        if (receipt.status !== 'success') return { state: 'dropped', reason: 'the call reverted' };
        const head = await client.getBlockNumber({ cacheTime: 0 });
        return {
          state: 'mined',
          blockNumber: Number(receipt.blockNumber),
          blockHash: receipt.blockHash,
          confirmations: Number(head - receipt.blockNumber) + 1,
        };
      }
      const pooled = await client.getTransaction({ hash }).catch((e) => {
        if (e?.name === 'TransactionNotFoundError') return undefined;
        throw new Error(`reading ${hash} at ${where}: ${short(e)}`);
      });
      if (pooled) return { state: 'pending' };
      const { nonce } = viem.parseTransaction(tx.raw as Hex);
      const used = await client.getTransactionCount({ address: account.address, blockTag: 'latest' });
      if (nonce !== undefined && used > nonce)
        return { state: 'dropped', reason: `nonce ${nonce} was used by another transaction` };
      return { state: 'unknown' };
    },
    close: () => o.signer.close(),
  };
}
