/**
 * The Bitcoin-family ledger (bitcoind, litecoind: one JSON-RPC): an anchor is a transaction
 * with one OP_RETURN output (head.ts) funded from the pinned address and paying its change back
 * to it, signed by the node's wallet (`CTL_ANCHOR_BTC_WALLET`, which holds that address's key).
 * Coins are only ever taken from the pinned address, so a verifier that pins it can tell the
 * service's anchors from anyone's OP_RETURN.
 */
import { createJsonRpc, JsonRpcError, redactRpcUrl } from '../chain/json-rpc.js';
import { btcAnchorPayload } from './head.js';
import { TxRejected, type Ledger, type TxStatus } from './ledger.js';

export interface BtcLedgerOptions {
  rpcUrl: string;
  /** `user:password` for the RPC (or from a cookie file, config.ts). */
  credentials?: string;
  /** The wallet that holds `address`'s key. */
  wallet: string;
  /** The pinned anchoring address: inputs from it only, change back to it. */
  address: string;
  /** Depth at which an anchor counts (default 6). */
  confirmations?: number;
  /** sat/vB; default: the node's estimate (its fallback fee on a chain without history). */
  feeRate?: number;
  fetch?: typeof fetch;
  timeoutMs?: number;
  name?: string;
}

type Unspent = { txid: string; vout: number; amount: number; address?: string };

// bitcoind's RPC error codes (rpc/protocol.h).
const RPC_WALLET_INVALID_TX = -5;
const RPC_VERIFY_ERROR = -25;
const RPC_VERIFY_REJECTED = -26;
const RPC_VERIFY_ALREADY_IN_CHAIN = -27;

/** @example const btc = createBtcLedger({ rpcUrl, credentials: 'u:p', wallet: 'anchor', address: 'bc1q…' }) */
export function createBtcLedger(o: BtcLedgerOptions): Ledger {
  const rpc = createJsonRpc({
    url: o.rpcUrl,
    credentials: o.credentials,
    fetch: o.fetch,
    timeoutMs: o.timeoutMs,
    version: '1.0',
  });
  const walletPath = `/wallet/${encodeURIComponent(o.wallet)}`;
  const w = <T>(method: string, params: unknown[] = []) => rpc<T>(method, params, walletPath);
  const where = redactRpcUrl(o.rpcUrl);

  return {
    name: o.name ?? 'btc',
    confirmations: o.confirmations ?? 6,
    kinds: ['anchor'],
    async prepare(job) {
      if (job.kind !== 'anchor') throw new Error('the Bitcoin-family ledger carries anchors only');
      // Unconfirmed change of our own earlier anchors counts (minconf 0): anchors may chain.
      const coins = await w<Unspent[]>('listunspent', [0, 9_999_999, [o.address]]);
      const coin = coins.filter((c) => c.address === o.address).sort((a, b) => b.amount - a.amount)[0];
      if (!coin) throw new Error(`no coins at the anchoring address ${o.address} in wallet '${o.wallet}': fund it`);
      const unsigned = await rpc<string>('createrawtransaction', [
        [{ txid: coin.txid, vout: coin.vout }],
        [{ data: btcAnchorPayload(job.head).toString('hex') }],
      ]);
      const funded = await w<{ hex: string }>('fundrawtransaction', [
        unsigned,
        { changeAddress: o.address, add_inputs: false, ...(o.feeRate ? { fee_rate: o.feeRate } : {}) },
      ]);
      const signed = await w<{ hex: string; complete: boolean }>('signrawtransactionwithwallet', [funded.hex]);
      if (!signed.complete)
        throw new Error(`wallet '${o.wallet}' at ${where} could not sign for ${o.address} (is its key in the wallet?)`);
      const { txid } = await rpc<{ txid: string }>('decoderawtransaction', [signed.hex]);
      return { txid, raw: signed.hex };
    },
    async broadcast(tx) {
      try {
        await rpc('sendrawtransaction', [tx.raw]);
      } catch (e) {
        if (!(e instanceof JsonRpcError) || !e.answered) throw e;
        if (e.code === RPC_VERIFY_ALREADY_IN_CHAIN || /already in (block chain|mempool)/i.test(e.message)) return;
        if (e.code === RPC_VERIFY_ERROR || e.code === RPC_VERIFY_REJECTED) {
          // "missing inputs" is also what our own transaction, mined meanwhile, answers.
          const mine = await w<{ confirmations: number }>('gettransaction', [tx.txid]).catch(() => undefined);
          if (mine && mine.confirmations > 0) return;
          throw new TxRejected(`${where} refused ${tx.txid}: ${e.message}`);
        }
        throw e;
      }
    },
    async status(tx): Promise<TxStatus> {
      let t: { confirmations: number; blockhash?: string; blockheight?: number };
      try {
        t = await w('gettransaction', [tx.txid]);
      } catch (e) {
        if (e instanceof JsonRpcError && e.code === RPC_WALLET_INVALID_TX) return { state: 'unknown' };
        throw e;
      }
      if (t.confirmations < 0) return { state: 'dropped', reason: 'a conflicting transaction spent its coin' };
      if (t.confirmations > 0 && t.blockhash) {
        const height = t.blockheight ?? (await rpc<{ height: number }>('getblockheader', [t.blockhash])).height;
        return { state: 'mined', blockNumber: height, blockHash: t.blockhash, confirmations: t.confirmations };
      }
      const pooled = await rpc('getmempoolentry', [tx.txid]).then(
        () => true,
        (e) => {
          if (e instanceof JsonRpcError && e.answered) return false;
          throw e;
        },
      );
      return pooled ? { state: 'pending' } : { state: 'unknown' };
    },
  };
}
